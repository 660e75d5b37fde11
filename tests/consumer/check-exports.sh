#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that a libnlockd.so exports the public API and nothing else (cmake/libnlockd.map): every
# defined dynamic symbol is in namespace nlockd, but for Asio's per-thread call stack, which a
# host on the same Asio must share with the library.
#   tests/consumer/check-exports.sh LIBNLOCKD_SO
set -euo pipefail
lib=${1:?usage: check-exports.sh LIBNLOCKD_SO}
symbols=$(nm -D --defined-only -C "$lib" | cut -d' ' -f3-)
shared_tss='asio::detail::keyword_tss_ptr<asio::detail::call_stack<asio::detail::thread_context, asio::detail::thread_info_base>::context>::value_'
leaked=$(grep -v '^nlockd::' <<<"$symbols" | grep -vFx -- "$shared_tss" || true)
if [[ -n "$leaked" ]]; then
  echo "check-exports: $lib exports symbols outside the public API:" >&2
  head -n 20 <<<"$leaked" >&2
  exit 1
fi
for wanted in 'nlockd::LockService::HandleCall(' 'nlockd::ToString(nlockd::LockResult)' "$shared_tss"; do
  grep -qF -- "$wanted" <<<"$symbols" || { echo "check-exports: $wanted is not exported" >&2; exit 1; }
done
echo "check-exports: $(wc -l <<<"$symbols") symbols, all public API"
