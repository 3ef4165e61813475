#!/usr/bin/env python3
"""Times ctxgc's Python package against contextgc and tracegc in the same process.

- ``compile_messages``: ctxgc vs contextgc on corpus conversations and the bundled chats,
  one compile per conversation.
- The loop a client runs, compiling its growing history before each request (200 requests):
  ctxgc keeps it compiled in a ``ctxgc.Chat``, contextgc compiles each whole; and one step of
  it (append a message, compile) at 1,000 messages.
- ``compact_events``: ctxgc vs tracegc on the bundled traces and on generated traces, single
  shot; ``add_event`` + ``compact()`` after each of 500 and of 10,000 events through each
  ``TraceGC``; and one such step at 10,000 events.

``--json`` prints one object per row:
``{"row", "items", "ctxgc_ms", "anchor": "contextgc"|"tracegc", "anchor_ms"}`` (``anchor_ms``
is null where the anchor refuses the input, with ``anchor_error``, or was stopped, with
``anchor_partial``).

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


def row(name: str, items: str, ctxgc_s: float, anchor: str, anchor_s: float | None, **extra: Any) -> dict:
    out = {"row": name, "items": items, "ctxgc_ms": ctxgc_s * 1000, "anchor": anchor,
           "anchor_ms": None if anchor_s is None else anchor_s * 1000}
    out.update(extra)
    return out


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


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
    items = f"{len(usable)} conv., {n_messages} msgs" + (f" ({failed} contextgc failed on)" if failed else "")
    return row(f"compile_messages: {name}", items, t_ctxgc, "contextgc", t_other)


def generated_chat(records: Path, n: int) -> list[dict]:
    """A long chat made of the corpus conversations one after another (the first system
    prompt kept, tool-call ids suffixed on each copy), cut at a message boundary that leaves
    no call open: the rule of ``ctxgc_core::synth::chat_json``."""
    conversations = load_conversations(records, 10**9)
    system = conversations[0][0] if conversations and conversations[0][0].get("role") == "system" else None
    turns = [c[1:] if c and c[0].get("role") == "system" else c for c in conversations]
    turns = [t for t in turns if t]
    out = [system] if system else []
    copy_no = 0
    while True:
        copy_no += 1
        for conversation in turns:
            for message in conversation:
                open_call = bool(out and out[-1].get("tool_calls"))
                if len(out) >= n and not open_call and message.get("role") != "tool":
                    return out
                message = copy.deepcopy(message)
                if copy_no > 1:
                    if isinstance(message.get("tool_call_id"), str):
                        message["tool_call_id"] += f"_{copy_no}"
                    for call in message.get("tool_calls") or []:
                        if isinstance(call.get("id"), str):
                            call["id"] += f"_{copy_no}"
                out.append(message)


def request_points(messages: list[dict]) -> list[int]:
    """Where a client sends a request: after each user or tool message."""
    return [i + 1 for i, m in enumerate(messages) if m.get("role") in ("user", "tool")]


def time_chat_loop(name: str, messages: list[dict], requests: int, repeat: int) -> dict:
    """A client compiling its growing history before each request: ctxgc keeps it compiled in
    a ``ctxgc.Chat`` (the history resent, as ``wrap()`` does); contextgc compiles each whole."""
    points = request_points(messages)[:requests]

    def run_ctxgc() -> None:
        chat = ctxgc.Chat()
        history: list[dict] = []
        for end in points:
            history.extend(messages[len(history):end])
            chat.compile(history)

    t_ctxgc = best_of(repeat, run_ctxgc)
    t_other = best_of(
        repeat,
        lambda batch: [contextgc.compile_messages(p) for p in batch],
        lambda: [copy.deepcopy(messages[:end]) for end in points],
    )
    return row(f"compile before each request of a growing chat: {name}",
               f"{len(points)} requests, {points[-1]} msgs", t_ctxgc, "contextgc", t_other)


def time_chat_step(messages: list[dict], at: int, steps: int) -> dict:
    """One step of a live chat of ``at`` messages: append a message, compile; the median of
    ``steps``. contextgc, which keeps nothing, compiles the whole history each step."""
    chat = ctxgc.Chat(messages[:at])
    chat.compiled()
    times = []
    for message in messages[at:at + steps]:
        start = time.perf_counter()
        chat.append(message)
        chat.compiled()
        times.append(time.perf_counter() - start)
    other = []
    for end in range(at + 1, at + 4):
        batch = copy.deepcopy(messages[:end])
        start = time.perf_counter()
        contextgc.compile_messages(batch)
        other.append(time.perf_counter() - start)
    return row(f"Chat append + compiled() at {at:,} messages, per step", f"median of {len(times)} steps",
               median(times), "contextgc", median(other))


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
    items = f"{len(events):,} events"
    try:
        tracegc.compact_events(copy.deepcopy(events))
    except Exception as e:  # noqa: BLE001 - the other library's refusals are reported
        return row(f"compact_events: {name}", items, t_ctxgc, "tracegc", None, anchor_error=str(e))
    # tracegc changes the events it is given: fresh copies, made outside the timing.
    t_other = best_of(repeat, lambda batch: tracegc.compact_events(batch), lambda: copy.deepcopy(events))
    return row(f"compact_events: {name}", items, t_ctxgc, "tracegc", t_other)


def time_event_loop(events: list[dict], repeat: int, anchor_budget_s: float) -> dict:
    """add_event + compact() after every event, through each library's ``TraceGC``. tracegc
    recompiles everything each time; it is stopped once it has run ``anchor_budget_s``, and
    then the row says how far it got (its time for the whole loop is more than that)."""

    def run_ctxgc() -> None:
        live = ctxgc.TraceGC()
        for e in events:
            live.add_event(e)
            live.compact()

    t_ctxgc = best_of(repeat, run_ctxgc)
    batch = copy.deepcopy(events)
    live = tracegc.TraceGC()
    start = time.perf_counter()
    done = 0
    for e in batch:
        live.add_event(e)
        live.compact()
        done += 1
        if time.perf_counter() - start > anchor_budget_s:
            break
    t_other = time.perf_counter() - start
    name = f"TraceGC: add_event + compact() after each of {len(events):,} events"
    if done < len(events):
        return row(name, f"{len(events):,} events", t_ctxgc, "tracegc", None,
                   anchor_partial={"events": done, "ms": t_other * 1000})
    return row(name, f"{len(events):,} events", t_ctxgc, "tracegc", t_other)


def time_event_step(events: list[dict], at: int, steps: int) -> dict:
    """One step of a live trace of ``at`` events: add_event, compact(); the median of ``steps``
    (tracegc: of 3)."""

    def steps_of(make: Callable[[], Any], batch: list[dict], count: int) -> float:
        live = make()
        for e in batch[:at]:
            live.add_event(e)
        live.compact()
        times = []
        for e in batch[at:at + count]:
            start = time.perf_counter()
            live.add_event(e)
            live.compact()
            times.append(time.perf_counter() - start)
        return median(times)

    t_ctxgc = steps_of(ctxgc.TraceGC, events, steps)
    t_other = steps_of(tracegc.TraceGC, copy.deepcopy(events), 3)
    return row(f"TraceGC add_event + compact() at {at:,} events, per step", f"median of {steps} steps",
               t_ctxgc, "tracegc", t_other)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("CTXGC_CORPUS", REPO.parent / "shared" / "corpus")))
    parser.add_argument("--conversations", type=int, default=40, help="conversations per corpus file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--anchor-budget", type=float, default=60.0,
                        help="seconds tracegc's 10,000-event loop may run before it is stopped")
    parser.add_argument("--json", action="store_true", help="print one JSON object per row")
    args = parser.parse_args()

    rows = []
    airline = json.loads((REPO / "crates/ctxgc-core/tests/fixtures/chat/airline_cabin_change.json").read_text())
    support = json.loads((REPO / "examples/support-session.json").read_text())
    rows.append(time_chats("bundled airline + support chats", [airline, support], args.repeat))
    rows.append(time_chat_loop("bundled support session", support, 200, args.repeat))
    for name in ("tau-bench-airline-gpt4o.jsonl", "swe-agent-trajectories.jsonl", "toolbench-examples.jsonl",
                 "tau2-bench-leaderboard.jsonl", "tau2-bench-fork-grok.jsonl"):
        path = args.corpus / name
        if path.is_file():
            rows.append(time_chats(name, load_conversations(path, args.conversations), args.repeat))
        else:
            print(f"note: {path} not found; skipped", file=sys.stderr)
    records = args.corpus / "tau-bench-airline-gpt4o.jsonl"
    if not records.is_file():
        records = REPO / "examples/bench/corpus-sample.jsonl"
    long_chat = generated_chat(records, 1_300)
    rows.append(time_chat_loop(f"{records.name} conversations in a row", long_chat, 200, args.repeat))
    rows.append(time_chat_step(long_chat, 1_000, 200))

    coding = [json.loads(line) for line in (REPO / "examples/coding-session.jsonl").read_text().splitlines() if line.strip()]
    rows.append(time_events("bundled coding session", coding, args.repeat))
    for fixture in sorted((REPO / "examples/bench").glob("*.json")):
        events = [e for e in json.loads(fixture.read_text())["events"] if e.get("type") != "edge_injection"]
        rows.append(time_events(f"bundled {fixture.stem}", events, args.repeat))
    for n in (1_000, 10_000):
        rows.append(time_events(f"generated, {n:,} events", generated_trace(n), args.repeat))
    rows.append(time_event_loop(generated_trace(500), args.repeat, float("inf")))
    rows.append(time_event_loop(generated_trace(10_000), 1, args.anchor_budget))
    rows.append(time_event_step(generated_trace(10_300), 10_000, 200))

    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"ctxgc {ctxgc.__version__}, contextgc {getattr(contextgc, '__version__', '?')}, tracegc 0.6.0; best of {args.repeat}")
    print()
    print("| benchmark | input | ctxgc | anchor | ratio (anchor / ctxgc) |")
    print("|---|---|---|---|---|")
    for r in rows:
        ours = f"{r['ctxgc_ms']:.3f} ms" if r["ctxgc_ms"] < 1 else f"{r['ctxgc_ms']:.1f} ms"
        if r["anchor_ms"] is not None:
            theirs = f"{r['anchor_ms']:.3f} ms" if r["anchor_ms"] < 1 else f"{r['anchor_ms']:.1f} ms"
            print(f"| {r['row']} | {r['items']} | {ours} | {r['anchor']} {theirs} | {r['anchor_ms'] / r['ctxgc_ms']:.1f}× |")
        elif "anchor_partial" in r:
            part = r["anchor_partial"]
            print(f"| {r['row']} | {r['items']} | {ours} | {r['anchor']} stopped after {part['events']:,} events "
                  f"and {part['ms'] / 1000:.0f} s | > {part['ms'] / r['ctxgc_ms']:.0f}× |")
        else:
            print(f"| {r['row']} | {r['items']} | {ours} | {r['anchor']} refuses it: {r['anchor_error']} | |")


if __name__ == "__main__":
    main()
