#!/usr/bin/env bash
# Compiles the same inputs with two ctxgc binaries and counts the outputs that differ: every
# conversation of every corpus file (one input each), the bundled examples and fixtures, and
# generated traces and chats, under every preset, with and without --json. A change that is
# meant to be only faster shows 0 differences against the build before it.
#
#   scripts/identity-check.sh OLD_CTXGC NEW_CTXGC [CORPUS_DIR]
#
# Build the old binary from the commit before, in a worktree of its own:
#   git worktree add /tmp/ctxgc-old HEAD~1 && cargo build --release -p ctxgc-cli \
#     --manifest-path /tmp/ctxgc-old/Cargo.toml --target-dir /tmp/ctxgc-old-target
set -euo pipefail

old=${1:?usage: identity-check.sh OLD_CTXGC NEW_CTXGC [CORPUS_DIR]}
new=${2:?usage: identity-check.sh OLD_CTXGC NEW_CTXGC [CORPUS_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${3:-${CTXGC_CORPUS:-$root/../shared/corpus}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

inputs=("$root"/examples/*.json "$root"/examples/*.jsonl "$root"/examples/bench/*.json)
while IFS= read -r -d '' f; do inputs+=("$f"); done < <(
  find "$root/crates/ctxgc-core/tests/fixtures" -type f \( -name '*.json' -o -name '*.jsonl' \) -print0 | sort -z)

# Each conversation of a JSONL corpus file (records with "messages") becomes an input.
split_records() {
  python3 - "$1" "$2" <<'PY'
import json, sys
src, out = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f:
    for n, line in enumerate(f):
        if not line.strip():
            continue
        record = json.loads(line)
        if isinstance(record, dict) and isinstance(record.get("messages"), list):
            with open(f"{out}-{n:04d}.json", "w", encoding="utf-8") as o:
                json.dump(record["messages"], o)
PY
}
if [ -d "$corpus" ]; then
  for f in "$corpus"/*.jsonl; do
    split_records "$f" "$work/$(basename "$f" .jsonl)"
  done
  inputs+=("$work"/*.json)
else
  echo "note: no corpus at $corpus; bundled inputs only" >&2
fi

probe=("$root/target/release/examples/perf_probe")
if [ -x "${probe[0]}" ]; then
  for n in 1000 10000; do
    "${probe[@]}" gen-events "$n" "$work/gen-events-$n.json"
    inputs+=("$work/gen-events-$n.json")
  done
  records=$corpus/tau-bench-airline-gpt4o.jsonl
  [ -f "$records" ] || records=$root/examples/bench/corpus-sample.jsonl
  for n in 100 1000; do
    "${probe[@]}" gen-chat "$n" "$records" "$work/gen-chat-$n.json"
    inputs+=("$work/gen-chat-$n.json")
  done
else
  echo "note: no perf_probe (cargo build --release -p ctxgc-core --example perf_probe); no generated inputs" >&2
fi

presets=(default lossless aggressive cache-stable)
checked=0 differ=0
for input in "${inputs[@]}"; do
  for preset in "${presets[@]}"; do
    for json in "" --json; do
      a=$("$old" compile --preset "$preset" $json "$input" 2>&1; echo "rc=$?")
      b=$("$new" compile --preset "$preset" $json "$input" 2>&1; echo "rc=$?")
      checked=$((checked + 1))
      if [ "$a" != "$b" ]; then
        differ=$((differ + 1))
        [ "$differ" -le 10 ] && echo "differs: $input --preset $preset $json"
      fi
    done
  done
done
echo "inputs: ${#inputs[@]}; compiles compared: $checked; differences: $differ"
[ "$differ" -eq 0 ]
