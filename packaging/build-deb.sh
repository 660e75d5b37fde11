#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages (nlockd, libnlockd0, nlockd-dev, nlockd-statd) from this checkout with
# `dpkg-buildpackage -b -us -uc`, in a copy of the tracked and new files under build-deb/ (so
# that the .deb files land in build-deb/ rather than beside the checkout, and ccache sees the
# same paths every time). The git revision is passed in, since the copy has no .git.
# Usage: packaging/build-deb.sh      -> prints the paths of the .deb files it built
# NLOCKD_MAINTAINER="Full Name <address>" puts whoever builds a release in debian/control's
# Maintainer field and the changelog's trailer of the copy (the tree keeps the team's entry).
# DEB_BUILD_OPTIONS defaults to nocheck (scripts/test.sh runs every test itself); without it
# the package build also runs the unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
version=$(dpkg-parsechangelog -S Version)
project_version=$(sed -n 's/^project(nlockd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
if [[ "$version" != "$project_version" ]]; then
  echo "build-deb: debian/changelog says $version but CMakeLists.txt says $project_version" >&2
  exit 1
fi
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [[ "$revision" != unknown && -n "$(git status --porcelain --untracked-files=no)" ]]; then
  revision+="-dirty"
fi

out="$root/build-deb"
src="$out/nlockd-$version"
rm -rf "$src" "$out"/*.deb "$out"/*.buildinfo "$out"/*.changes
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | grep -zv '^build' |
  xargs -0 tar -cf - --no-recursion | tar -xf - -C "$src"

cd "$src"
if [[ -n "${NLOCKD_MAINTAINER:-}" ]]; then
  sed -i "s|^Maintainer: .*|Maintainer: $NLOCKD_MAINTAINER|" debian/control
  sed -i "s|^ -- .* <[^>]*>  | -- $NLOCKD_MAINTAINER  |" debian/changelog
fi
export NLOCKD_GIT_REVISION="$revision"
export CCACHE_BASEDIR="$src"
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-nocheck} parallel=$(nproc)"
dpkg-buildpackage -b -us -uc >"$out/dpkg-buildpackage.log" 2>&1 || {
  tail -n 60 "$out/dpkg-buildpackage.log" >&2
  exit 1
}
ls "$out"/*.deb
