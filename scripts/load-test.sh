#!/usr/bin/env bash
# Load on loopback: the gateway with 1,000 concurrent streams and the proxy with 200
# concurrent HTTP tool calls, each in rounds for SECONDS, checking every answer is whole and
# its own, and printing resident memory after every round (it must stay flat).
#
#   scripts/load-test.sh [SECONDS]     # per component (default 60)
#
# The tests are crates/ctxgc-gateway/tests/load.rs and crates/ctxgc-proxy/tests/load.rs,
# ignored in the normal suite. CTXGC_LOAD_STREAMS (gateway, default 1000),
# CTXGC_LOAD_AGENTS x CTXGC_LOAD_CALLS_PER_AGENT (proxy, default 20 x 10) change the load.
# Builds the test profile (dependencies optimised); add --release by setting
# CTXGC_LOAD_RELEASE=1 for figures of a release build.
set -euo pipefail

seconds=${1:-60}
cd "$(dirname "$0")/.."
release=()
if [[ ${CTXGC_LOAD_RELEASE:-0} == 1 ]]; then
    release=(--release)
fi
for target in ctxgc-gateway:load ctxgc-proxy:load; do
    crate=${target%%:*}
    test=${target##*:}
    CTXGC_LOAD_SECONDS=$seconds nice -n 10 cargo test -q "${release[@]}" -p "$crate" --test "$test" \
        -- --ignored --nocapture --test-threads 1 2>&1 | grep -E 'round|load:|panicked|test result'
done
