#!/usr/bin/env bash
# Builds the Debian packages (nlockd, libnlockd0, nlockd-dev) from this checkout with
# `dpkg-buildpackage -b -us -uc`, in a copy of the tracked and new files under build-deb/ (so
# that the .deb files land in build-deb/ rather than beside the checkout, and ccache sees the
# same paths every time). The git revision is passed in, since the copy has no .git.
# Usage: packaging/build-deb.sh      -> prints the paths of the .deb files it built
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
export NLOCKD_GIT_REVISION="$revision"
export CCACHE_BASEDIR="$src"
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-nocheck} parallel=$(nproc)"
dpkg-buildpackage -b -us -uc >"$out/dpkg-buildpackage.log" 2>&1 || {
  tail -n 60 "$out/dpkg-buildpackage.log" >&2
  exit 1
}
ls "$out"/*.deb
