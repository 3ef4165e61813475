#!/usr/bin/env bash
# Runs every fuzz-style property target for longer than CI does, and prints executions and
# failures per target.
#
#   scripts/fuzz.sh [CASES]        # cases per property (default 2000)
#
# Targets: crates/ctxgc-core/tests/fuzz.rs (every front-end, the state-block parser, the
# projection file, Python literals, tool outputs, expand arguments),
# crates/ctxgc-gateway/tests/fuzz_requests.rs (request parsing, the usage reader, whole
# requests over HTTP) and crates/ctxgc-proxy/tests/fuzz_jsonrpc.rs (the stdio gate, POSTs to
# /mcp). HTTP properties run a quarter of CASES (each case is a real round trip).
# Inputs are random per run (proptest); a failure prints the minimal failing input.
# Set CARGO_TARGET_DIR as usual; runs under `nice -n 10`.
set -uo pipefail

cases=${1:-2000}
cd "$(dirname "$0")/.."
status=0
for target in ctxgc-core:fuzz ctxgc-gateway:fuzz_requests ctxgc-proxy:fuzz_jsonrpc; do
    crate=${target%%:*}
    test=${target##*:}
    started=$(date +%s)
    log=$(mktemp)
    CTXGC_FUZZ_CASES=$cases nice -n 10 cargo test -q -p "$crate" --test "$test" -- --test-threads 1 >"$log" 2>&1
    rc=$?
    elapsed=$(($(date +%s) - started))
    summary=$(grep -E '^test result:' "$log" | tail -1)
    echo "$crate/$test: $cases cases per property, ${elapsed}s, exit $rc: $summary"
    if [[ $rc -ne 0 ]]; then
        status=1
        grep -E 'panicked|minimal failing input|Test failed' "$log" | head -20
        echo "  full log: $log"
    else
        rm -f "$log"
    fi
done
exit $status
