#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails when a tracked C++ file differs from what clang-format 14 makes of it (.clang-format).
# Fix with: git ls-files '*.cpp' '*.hpp' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=$(command -v clang-format-14 || command -v clang-format)
mapfile -t unformatted < <(git ls-files -z '*.cpp' '*.hpp' | xargs -0 "$formatter" --dry-run 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' | sort -u)
if ((${#unformatted[@]} > 0)); then
  echo "check-format: ${#unformatted[@]} file(s) differ from clang-format:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "check-format: run git ls-files '*.cpp' '*.hpp' | xargs $formatter -i" >&2
  exit 1
fi
echo "check-format: $(git ls-files '*.cpp' '*.hpp' | wc -l) files formatted"
