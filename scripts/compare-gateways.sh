#!/usr/bin/env bash
# ctxgc gateway beside LiteLLM's proxy, in front of the same fake provider on loopback, on the
# same growing conversations, in one run on this machine.
#
#   scripts/compare-gateways.sh            # Markdown tables (docs/gateway.md's shape)
#   scripts/compare-gateways.sh --json     # one merged JSON object per gateway and case
#   QUICK=1 scripts/compare-gateways.sh    # fewer requests, 60 s of soak: a smoke run
#
# Gateways: ctxgc compiling (default preset), ctxgc --no-compile, LiteLLM proxy (pinned, from
# the package index into a throwaway venv under target/, two workers: one per core, as
# ctxgc's runtime has). Cases: OpenAI Chat and Anthropic Messages x 10k and 100k tokens x
# streamed or not x concurrency 1 and 64. Each case is driven twice with the same requests,
# direct to the provider and then through the gateway; "added" is the difference of the
# percentiles. Then, per gateway and workload at 10k tokens, the request rate while p99 added
# stays within 5 ms, and a soak (SOAK_S seconds, default 600) that samples resident memory
# for a leak rate.
#
# Every line of the JSON output has gateway, api, tokens, concurrency, stream, p50_ms, p99_ms
# (added), ttfb_added_ms (streamed cases), rss_mb (after the case), and besides them
# rss_idle_mb, rss_after_load_mb, leak_mb_per_min, rps_within_limit and, for ctxgc,
# p50_ms_vs_litellm / p99_ms_vs_litellm (ratios of the same case in the same run).
#
# Environment: LITELLM_VERSION (default 1.108.5), SOAK_S, REQUESTS (per phase, default
# 300), GATEWAYS (default "ctxgc ctxgc-no-compile litellm"), TOKENS (default
# "10000 100000"), KEEP=1 to keep the work folder.
set -euo pipefail
cd "$(dirname "$0")/.."

json=0
for arg in "$@"; do
    case $arg in
    --json) json=1 ;;
    -h | --help)
        sed -n '2,25p' "$0"
        exit 0
        ;;
    *)
        echo "compare-gateways: unknown argument $arg (expected --json)" >&2
        exit 2
        ;;
    esac
done

litellm_version=${LITELLM_VERSION:-1.108.5}
gateways=${GATEWAYS:-"ctxgc ctxgc-no-compile litellm"}
token_sizes=${TOKENS:-"10000 100000"}
if [[ ${QUICK:-0} == 1 ]]; then
    requests=${REQUESTS:-60}
    soak_s=${SOAK_S:-60}
    sweep=1,8,32
else
    requests=${REQUESTS:-300}
    soak_s=${SOAK_S:-600}
    sweep=1,2,4,8,16,32,64
fi

say() { echo "compare-gateways: $*" >&2; }

say "building ctxgc and the load driver (release)"
cargo build -q --release -p ctxgc-cli -p ctxgc-gateway-compare
ctxgc=$PWD/target/release/ctxgc
driver=$PWD/target/release/gateway-compare

work=$(mktemp -d "${TMPDIR:-/tmp}/compare-gateways.XXXXXX")
results=$work/results.jsonl
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [[ ${KEEP:-0} == 1 ]]; then
        say "work folder kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

if [[ " $gateways " == *" litellm "* ]]; then
    venv=$PWD/target/compare-gateways/litellm-$litellm_version
    if [[ ! -x $venv/bin/litellm ]]; then
        say "installing litellm[proxy]==$litellm_version into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check "litellm[proxy]==$litellm_version" >&2
    fi
fi

# Waits until a server answers on its port (any HTTP status will do).
wait_up() {
    local url=$1 pid=$2 log=$3
    for _ in $(seq 1 600); do
        if curl -s -o /dev/null --max-time 1 "$url"; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "the server behind $url stopped; its log:"
            tail -n 30 "$log" >&2
            exit 1
        fi
        sleep 0.1
    done
    say "$url did not come up in 60 s"
    exit 1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

"$driver" fake-provider --port 0 >"$work/provider.addr" 2>"$work/provider.log" &
pids+=($!)
for _ in $(seq 1 100); do
    [[ -s $work/provider.addr ]] && break
    sleep 0.05
done
provider=$(head -n1 "$work/provider.addr")
[[ -n $provider ]] || {
    say "the fake provider did not start"
    exit 1
}
say "fake provider at $provider"

# Starts gateway $1 and sets base and gateway_pid.
start_gateway() {
    local name=$1 port log=$work/$1.log
    port=$(free_port)
    case $name in
    ctxgc)
        CTXGC_TENANT_SECRET=compare "$ctxgc" gateway --upstream "$provider" --port "$port" \
            --db "$work/ctxgc.db" --quiet 2>"$log" &
        ;;
    ctxgc-no-compile)
        "$ctxgc" gateway --upstream "$provider" --port "$port" --no-compile --quiet 2>"$log" &
        ;;
    litellm)
        cat >"$work/litellm.yaml" <<EOF
model_list:
  - model_name: compare-gpt
    litellm_params:
      model: openai/compare-gpt
      api_base: $provider/v1
      api_key: sk-fake-provider
  - model_name: compare-claude
    litellm_params:
      model: anthropic/compare-claude
      api_base: $provider
      api_key: sk-fake-provider
litellm_settings:
  telemetry: false
EOF
        # No master key: requests are not authenticated (loopback only), which spares LiteLLM
        # its key lookup; it refuses to start so unless told this is meant.
        (cd "$work" && LITELLM_LOG=ERROR NO_DOCS=True \
            LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY=true exec "$venv/bin/litellm" \
            --config "$work/litellm.yaml" --host 127.0.0.1 --port "$port" --num_workers 2 \
            >"$log" 2>&1) &
        ;;
    *)
        say "unknown gateway $name (expected ctxgc, ctxgc-no-compile or litellm)"
        exit 2
        ;;
    esac
    gateway_pid=$!
    pids+=("$gateway_pid")
    base=http://127.0.0.1:$port
    wait_up "$base/" "$gateway_pid" "$log"
}

for gateway in $gateways; do
    start_gateway "$gateway"
    say "$gateway at $base (pid $gateway_pid)"
    # A first request of each API, so that lazily loaded code is not measured as idle.
    for api in openai anthropic; do
        "$driver" drive --base "$base" --api "$api" --tokens 1000 --requests 1 --warmup 0 \
            --gateway "$gateway" --json >/dev/null || true
    done
    "$driver" rss --pid "$gateway_pid" --gateway "$gateway" --json >>"$results"
    for tokens in $token_sizes; do
        for api in openai anthropic; do
            for stream in "" --stream; do
                for concurrency in 1 64; do
                    say "$gateway $api ${tokens} tokens ${stream:---no-stream} c=$concurrency"
                    "$driver" drive --base "$base" --direct "$provider" --api "$api" \
                        --tokens "$tokens" --concurrency "$concurrency" $stream \
                        --requests "$requests" --gateway "$gateway" --rss-pid "$gateway_pid" \
                        --json >>"$results"
                done
            done
        done
    done
    for api in openai anthropic; do
        say "$gateway $api: rate within 5 ms p99 added"
        "$driver" drive --base "$base" --direct "$provider" --api "$api" --tokens 10000 \
            --sweep "$sweep" --limit-ms 5 --requests "$requests" --duration 30 \
            --gateway "$gateway" --json >>"$results"
    done
    say "$gateway: ${soak_s} s of load, memory sampled"
    "$driver" soak --base "$base" --pid "$gateway_pid" --gateway "$gateway" \
        --duration "$soak_s" --json >>"$results"
    kill "$gateway_pid" 2>/dev/null || true
    wait "$gateway_pid" 2>/dev/null || true
done

if [[ $json == 1 ]]; then
    "$driver" report --json "$results"
else
    say "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); litellm $litellm_version"
    "$driver" report "$results"
fi
