#!/usr/bin/env python3
"""Times ctxgc's Python package against contextgc and tracegc in the same process.

- ``compile_messages``: ctxgc vs contextgc on corpus conversations and the bundled chats,
  one compile per conversation, and an agent loop (every prefix compiled, as a client
  compiles before each request) on the bundled support session.
- ``compact_events``: ctxgc vs tracegc on the bundled traces and on generated traces, single
  shot, and an agent loop (append one event, compact, repeat) through each ``TraceGC``.

Each figure is the best of ``--repeat`` runs of wall-clock time (``time.perf_counter``).
Both libraries' token figures differ in kind (exact BPE for ctxgc, characters / 4 for the
others), so only times are compared. Run it in a throwaway venv::

    python -m venv /tmp/ctxgc-bench
    /tmp/ctxgc-bench/bin/pip install contextgc tracegc tracegc-storage ./crates/ctxgc-py
    /tmp/ctxgc-bench/bin/python scripts/bench-python.py --corpus ../shared/corpus
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import contextgc
import tracegc

import ctxgc

REPO = Path(__file__).resolve().parents[1]


def best_of(repeat: int, fn: Callable[[], Any], prepare: Callable[[], Any] | None = None) -> float:
    """Best wall time in seconds; ``prepare`` makes fresh input outside the timing."""
    best = float("inf")
    for _ in range(repeat):
        arg = prepare() if prepare else None
        start = time.perf_counter()
        fn(arg) if prepare else fn()
        best = min(best, time.perf_counter() - start)
    return best


def load_conversations(path: Path, limit: int) -> list[list[dict]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line)["messages"])
            if len(out) >= limit:
                break
    return out


def time_chats(name: str, chats: list[list[dict]], repeat: int) -> dict:
    """Compiles every conversation with each library; conversations contextgc cannot
    compile are counted and left out of both timings."""
    usable, failed = [], 0
    for messages in chats:
        try:
            contextgc.compile_messages(copy.deepcopy(messages))
            usable.append(messages)
        except Exception:  # noqa: BLE001 - the other library's failures are what is counted
            failed += 1
    t_ctxgc = best_of(repeat, lambda: [ctxgc.compile_messages(m) for m in usable])
    t_other = best_of(
        repeat,
        lambda batch: [contextgc.compile_messages(m) for m in batch],
        lambda: copy.deepcopy(usable),
    )
    n_messages = sum(len(m) for m in usable)
    return {
        "bench": f"compile_messages: {name}",
        "items": f"{len(usable)} conv., {n_messages} msgs" + (f" ({failed} contextgc failed on)" if failed else ""),
        "ctxgc_ms": t_ctxgc * 1000,
        "other": "contextgc",
        "other_ms": t_other * 1000,
    }


def time_chat_loop(name: str, messages: list[dict], repeat: int) -> dict:
    """Every prefix that ends in a user or tool message, compiled: what a wrapped client does."""
    prefixes = [messages[: i + 1] for i, m in enumerate(messages) if m.get("role") in ("user", "tool")]
    t_ctxgc = best_of(repeat, lambda: [ctxgc.compile_messages(p) for p in prefixes])
    t_other = best_of(
        repeat,
        lambda batch: [contextgc.compile_messages(p) for p in batch],
        lambda: copy.deepcopy(prefixes),
    )
    return {
        "bench": f"compile_messages, every request of a loop: {name}",
        "items": f"{len(prefixes)} requests",
        "ctxgc_ms": t_ctxgc * 1000,
        "other": "contextgc",
        "other_ms": t_other * 1000,
    }


def generated_trace(n: int) -> list[dict]:
    """A deterministic coding-agent trace: overwritten variables, repeated identical tool
    calls, reads made stale by edits, decisions, abandoned branches."""
    events: list[dict] = []
    parent = None

    def add(event: dict) -> None:
        nonlocal parent
        event["parent_id"] = parent
        event["timestamp"] = len(events) * 10
        events.append(event)
        parent = event["id"]

    i = 0
    while len(events) < n:
        kind = i % 6
        eid = f"e{len(events)}"
        if kind == 0:
            add({"id": eid, "type": "set_var", "key": f"k{i % 40}", "value": i})
        elif kind == 1:
            add({"id": eid, "type": "tool_call", "tool_name": "search", "arguments": {"q": f"q{i % 25}"}})
            add({"id": f"{eid}r", "type": "tool_result", "call_id": eid, "result": {"hits": i % 25}})
        elif kind == 2:
            add({"id": eid, "type": "file_read", "path": f"src/m{i % 30}.py"})
        elif kind == 3:
            add({"id": eid, "type": "file_edit", "path": f"src/m{i % 30}.py", "diff_hash": f"h{i}"})
        elif kind == 4:
            add({"id": eid, "type": "decision", "content": f"Step {i}: keep going"})
        else:
            # A side branch tried and abandoned; the main line carries on from before it.
            main_line = parent
            add({"id": eid, "type": "decision", "content": f"Try idea {i}"})
            add({"id": f"{eid}a", "type": "abandon", "ref_to": [eid]})
            parent = main_line
        i += 1
    return events[:n]


def time_events(name: str, events: list[dict], repeat: int) -> dict:
    t_ctxgc = best_of(repeat, lambda: ctxgc.compact_events(events))
    try:
        tracegc.compact_events(copy.deepcopy(events))
    except Exception as e:  # noqa: BLE001 - the other library's refusals are reported
        return {
            "bench": f"compact_events: {name}",
            "items": f"{len(events)} events",
            "ctxgc_ms": t_ctxgc * 1000,
            "other": "tracegc",
            "other_ms": None,
            "other_error": str(e),
        }
    # tracegc changes the events it is given: fresh copies, made outside the timing.
    t_other = best_of(repeat, lambda batch: tracegc.compact_events(batch), lambda: copy.deepcopy(events))
    return {
        "bench": f"compact_events: {name}",
        "items": f"{len(events)} events",
        "ctxgc_ms": t_ctxgc * 1000,
        "other": "tracegc",
        "other_ms": t_other * 1000,
    }


def time_event_loop(name: str, events: list[dict], repeat: int) -> dict:
    def run_ctxgc() -> None:
        live = ctxgc.TraceGC()
        for e in events:
            live.add_event(e)
            live.compact()

    def run_tracegc(batch: list[dict]) -> None:
        live = tracegc.TraceGC()
        for e in batch:
            live.add_event(e)
            live.compact()

    t_ctxgc = best_of(repeat, run_ctxgc)
    t_other = best_of(repeat, run_tracegc, lambda: copy.deepcopy(events))
    return {
        "bench": f"TraceGC: add_event + compact() per event: {name}",
        "items": f"{len(events)} events",
        "ctxgc_ms": t_ctxgc * 1000,
        "other": "tracegc",
        "other_ms": t_other * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("CTXGC_CORPUS", REPO.parent / "shared" / "corpus")))
    parser.add_argument("--conversations", type=int, default=40, help="conversations per corpus file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()

    rows = []
    airline = json.loads((REPO / "crates/ctxgc-core/tests/fixtures/chat/airline_cabin_change.json").read_text())
    support = json.loads((REPO / "examples/support-session.json").read_text())
    rows.append(time_chats("bundled airline + support chats", [airline, support], args.repeat))
    rows.append(time_chat_loop("bundled support session", support, args.repeat))
    for name in ("tau-bench-airline-gpt4o.jsonl", "swe-agent-trajectories.jsonl", "toolbench-examples.jsonl", "tau2-bench-leaderboard.jsonl"):
        path = args.corpus / name
        if path.is_file():
            rows.append(time_chats(name, load_conversations(path, args.conversations), args.repeat))
        else:
            print(f"note: {path} not found; skipped", file=sys.stderr)

    coding = [json.loads(line) for line in (REPO / "examples/coding-session.jsonl").read_text().splitlines() if line.strip()]
    rows.append(time_events("bundled coding session", coding, args.repeat))
    for fixture in sorted((REPO / "examples/bench").glob("*.json")):
        events = [e for e in json.loads(fixture.read_text())["events"] if e.get("type") != "edge_injection"]
        rows.append(time_events(f"bundled {fixture.stem}", events, args.repeat))
    for n in (1_000, 10_000):
        rows.append(time_events(f"generated, {n:,} events", generated_trace(n), args.repeat))
    rows.append(time_event_loop("generated", generated_trace(500), 1))

    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"ctxgc {ctxgc.__version__}, contextgc {getattr(contextgc, '__version__', '?')}, tracegc 0.6.0; best of {args.repeat}")
    print()
    print("| benchmark | input | ctxgc | other | ratio (other / ctxgc) |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r["other_ms"] is None:
            print(f"| {r['bench']} | {r['items']} | {r['ctxgc_ms']:.1f} ms | {r['other']} refuses it: {r['other_error']} | |")
        else:
            print(f"| {r['bench']} | {r['items']} | {r['ctxgc_ms']:.1f} ms | {r['other']} {r['other_ms']:.1f} ms | {r['other_ms'] / r['ctxgc_ms']:.1f}× |")


if __name__ == "__main__":
    main()
