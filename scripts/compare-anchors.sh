#!/usr/bin/env bash
# Times ctxgc against the two published Python compilers it is measured by (tracegc for event
# traces, contextgc for chats) on the same generated inputs, and prints the ratios next to the
# performance targets.
#
#   scripts/compare-anchors.sh            # events 1k..1M, chats 100..10k
#   QUICK=1 scripts/compare-anchors.sh    # events up to 100k, chats up to 1k
#
# Needs cargo, python3 (with venv) and network access to PyPI: tracegc and contextgc are
# installed into a throwaway virtual environment that is deleted afterwards, with the inputs.
# ctxgc is timed as a whole process (`ctxgc compile FILE`, release build, output discarded) and
# in-process (the `perf_probe` example, through the library API); the Python tools in-process,
# input already parsed. Chats are tau-bench conversations put back to back: the corpus file
# from $CTXGC_CORPUS (default ../shared/corpus beside the checkout) when present, else the
# bundled examples/bench/corpus-sample.jsonl. Medians of several runs (one run at 1M events).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target=${CARGO_TARGET_DIR:-$root/target}

echo "building ctxgc (release)..." >&2
(cd "$root" && cargo build --quiet --release -p ctxgc-cli &&
    cargo build --quiet --release -p ctxgc-core --example perf_probe)

echo "installing tracegc and contextgc into a throwaway venv..." >&2
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check tracegc==0.6.0 contextgc==0.4.6

corpus=${CTXGC_CORPUS:-$root/../shared/corpus}
records=$corpus/tau-bench-airline-gpt4o.jsonl
[ -f "$records" ] || records=$root/examples/bench/corpus-sample.jsonl

CTXGC="$target/release/ctxgc" PROBE="$target/release/examples/perf_probe" \
    RECORDS="$records" WORK="$work" QUICK="${QUICK:-}" \
    "$work/venv/bin/python" - <<'PY'
import copy, json, os, statistics, subprocess, sys, time

ctxgc, probe, records, work = (os.environ[k] for k in ("CTXGC", "PROBE", "RECORDS", "WORK"))
quick = bool(os.environ.get("QUICK"))

from tracegc import compact_events
from contextgc import compile_messages


def probe_json(*args):
    out = subprocess.run([probe, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout) if out.stdout.strip() else None


def whole_process(path, runs):
    """Median wall seconds and the largest peak RSS (bytes) of `ctxgc compile PATH`."""
    walls, peak = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            proc = subprocess.Popen([ctxgc, "compile", path], stdout=sink, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"ctxgc compile {path} failed: {proc.stderr.read().decode()}")
        peak = max(peak, usage.ru_maxrss * 1024)
    return statistics.median(walls), peak


def python_in_process(fn, data, runs):
    walls = []
    for _ in range(runs):
        arg = copy.deepcopy(data)  # both tools may modify what they are given
        start = time.perf_counter()
        fn(arg)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def runs_for(n):
    return 1 if n >= 1_000_000 else 3 if n >= 100_000 else 7


def fmt_s(s):
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


rows = []  # (input, size, python, whole, in-process, ratio text, target, verdict)

# Start-up: a 10-event trace.
tiny = os.path.join(work, "events-10.json")
probe_json("gen-events", 10, tiny)
wall, _ = whole_process(tiny, 21)
rows.append(("events", "10", "", fmt_s(wall), "", "", "start-up + tiny input <= 5 ms",
             f"{'met' if wall <= 0.005 else 'missed'} ({wall * 1e3:.1f} ms)"))

for n in ([1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 1_000_000]):
    path = os.path.join(work, f"events-{n}.json")
    probe_json("gen-events", n, path)
    size = os.path.getsize(path)
    with open(path) as f:
        events = json.load(f)
    runs = runs_for(n)
    py = python_in_process(compact_events, events, runs)
    del events
    wall, peak = whole_process(path, runs)
    inproc = probe_json("compile", path, max(1, runs // 2))["median_ms"] / 1e3
    ratio = py / wall
    target, verdict = "", ""
    if n == 100_000:
        target = ">= 20x tracegc, whole process"
        verdict = f"{'met' if ratio >= 20 else 'missed'} ({ratio:.1f}x)"
    if n == 1_000_000:
        target = "< 1 s whole process; peak memory <= 3x input"
        verdict = (f"{'met' if wall < 1 else 'missed'} ({fmt_s(wall)}); "
                   f"{'met' if peak <= 3 * size else 'missed'} ({peak / size:.1f}x of {size / 1e6:.0f} MB)")
    rows.append(("events", f"{n:,}", fmt_s(py), fmt_s(wall), fmt_s(inproc),
                 f"{ratio:.1f}x / {py / inproc:.0f}x", target, verdict))

for n in ([100, 1_000] if quick else [100, 1_000, 10_000]):
    path = os.path.join(work, f"chat-{n}.json")
    probe_json("gen-chat", n, records, path)
    with open(path) as f:
        messages = json.load(f)
    runs = runs_for(n * 10)
    py = python_in_process(compile_messages, messages, runs)
    wall, _ = whole_process(path, runs)
    inproc = probe_json("compile", path, max(3, runs))["median_ms"] / 1e3
    target, verdict = "", ""
    if n == 1_000:
        target = "<= 10 ms whole process; >= 100x contextgc in-process"
        verdict = (f"{'met' if wall <= 0.010 else 'missed'} ({fmt_s(wall)}); "
                   f"{'met' if py / inproc >= 100 else 'missed'} ({py / inproc:.0f}x)")
    rows.append((f"chat ({len(messages):,} messages)", f"{n:,}", fmt_s(py), fmt_s(wall),
                 fmt_s(inproc), f"{py / wall:.1f}x / {py / inproc:.0f}x", target, verdict))
    if n == (1_000 if quick else 10_000):
        stateless = probe_json("append1", path, 50)["median_us"]
        rows.append((f"stateless caller: whole chat compiled after each message", f"{n:,}", "", "",
                     f"{stateless:.0f} us", "", "", ""))
        live = probe_json("live", path, 50)
        step = live["median_us"]
        rows.append((f"live session (LiveChat): append 1 + compile + register", f"{n:,}", "", "",
                     f"{step:.0f} us", "", "<= 100 us on 10k messages",
                     f"{'met' if step <= 100 else 'missed'} ({step:.0f} us)"))
        rows.append((f"live session: render the whole compiled chat", f"{n:,}", "", "",
                     f"{live['render_median_us']:.0f} us", "", "", ""))

counted = probe_json("count", records, 5)
count, cached = counted["mb_per_s"], counted["cached_mb_per_s"]
rows.append(("exact o200k_base counts", f"{os.path.getsize(records) / 1e6:.1f} MB", "", "",
             f"{count:.0f} MB/s", "", ">= 50 MB/s (uncached)",
             f"{'met' if count >= 50 else 'missed'} ({count:.0f} MB/s)"))
rows.append(("the same text recounted (cached)", f"{os.path.getsize(records) / 1e6:.1f} MB",
             "", "", f"{cached:.0f} MB/s", "", "", ""))
print(f"machine: {os.cpu_count()} cores, {os.uname().machine}, {os.uname().sysname} {os.uname().release}")
print(f"chats from: {os.path.basename(records)}")
print()
print("| input | size | Python in-process | ctxgc whole process | ctxgc in-process | ratio (whole / in-process) | target | verdict |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
