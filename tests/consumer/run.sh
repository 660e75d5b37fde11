#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the nlockd tree built in BUILD_DIR to a temporary prefix, then builds and runs
# tests/consumer/consumer.cpp against that prefix only: with find_package(nlockd) (the shared
# and the static library) and with pkg-config. Reuses BUILD_DIR (builds only what `install`
# needs if it is missing); a sanitized BUILD_DIR gives the consumer the same sanitizer flags,
# since an ASan-instrumented library needs its runtime in the program.
#
#   tests/consumer/run.sh BUILD_DIR
set -euo pipefail

build_dir=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/nlockd-consumer-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --build "$build_dir" --target nlockd_shared nlockd_static nlockd nlockd_admin_http nlockctl -- -j2 >/dev/null
cmake --install "$build_dir" --prefix "$prefix" >/dev/null

flags=""
sanitize=$(sed -n 's/^NLOCKD_SANITIZE:STRING=//p' "$build_dir/CMakeCache.txt")
case "$sanitize" in
  address) flags="-fsanitize=address,undefined" ;;
  thread) flags="-fsanitize=thread" ;;
esac
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

for layout in include/nlockd/nlockd.hpp include/nlockd/version.hpp lib/cmake/nlockd/nlockdConfig.cmake \
              lib/cmake/nlockd/nlockdConfigVersion.cmake lib/pkgconfig/nlockd.pc lib/libnlockd.a \
              sbin/nlockd lib/nlockd/nlockd-admin-http.so bin/nlockctl lib/systemd/system/nlockd.service; do
  [[ -e "$prefix/$layout" ]] || { echo "consumer: $layout was not installed" >&2; exit 1; }
done
# Only the public headers are installed.
if find "$prefix/include" -name '*.hpp' | grep -v '/include/nlockd/' | grep -q .; then
  echo "consumer: headers outside include/nlockd were installed" >&2
  exit 1
fi
# The installed daemon finds its admin HTTP module relative to itself (the prefix is not the one
# it was configured for) and serves.
log=$work/nlockd.log
"$prefix/sbin/nlockd" --serve nsm --store memory: --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --rpcbind-register false >"$log" 2>&1 &
daemon=$!
for _ in $(seq 300); do
  grep -q "nlockd admin listening" "$log" && break
  kill -0 "$daemon" 2>/dev/null || break
  sleep 0.1
done
kill "$daemon" 2>/dev/null || true
wait "$daemon" || true
grep -q "nlockd admin listening" "$log" || { cat "$log" >&2; echo "consumer: the installed nlockd did not start its admin server" >&2; exit 1; }
"$here/check-exports.sh" "$prefix"/lib/libnlockd.so >/dev/null
soname=$(objdump -p "$prefix"/lib/libnlockd.so | sed -n 's/ *SONAME *//p')
[[ "$soname" =~ ^libnlockd\.so\.[0-9]+$ ]] || { echo "consumer: bad SONAME '$soname'" >&2; exit 1; }

for static in OFF ON; do
  echo "== find_package(nlockd), static=$static"
  cmake -S "$here" -B "$work/cmake-$static" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_FLAGS="$flags" -DCONSUMER_STATIC=$static >/dev/null
  cmake --build "$work/cmake-$static" >/dev/null
  "$work/cmake-$static/consumer"
done

echo "== pkg-config nlockd"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ $flags "$here/consumer.cpp" -o "$work/consumer-pc" $(pkg-config --cflags --libs nlockd) \
  -Wl,-rpath,"$prefix/lib"
"$work/consumer-pc"
echo "consumer: ok"
