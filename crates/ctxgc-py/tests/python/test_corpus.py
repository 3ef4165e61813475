"""compile_messages over real agent transcripts: valid output, never larger, every removed
message recoverable."""

from __future__ import annotations

import json

import ctxgc


def _records(path, limit):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= limit:
                return
            if line.strip():
                yield json.loads(line)


def test_corpus_conversations_compile_to_valid_smaller_histories(corpus):
    checked = 0
    for name in ("tau-bench-airline-gpt4o.jsonl", "swe-agent-trajectories.jsonl", "toolbench-examples.jsonl"):
        for record in _records(corpus / name, 8):
            messages = record["messages"]
            compiled, telemetry = ctxgc.compile_messages(messages)
            assert telemetry["chat"]["validation"]["ok"], (name, record.get("id"), telemetry["chat"]["validation"])
            assert telemetry["tokens_after"] <= telemetry["tokens_before"]
            assert isinstance(compiled, list) and compiled
            # Every tool result still follows its call.
            calls = {c["id"] for m in compiled if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
            for m in compiled:
                if m.get("role") == "tool":
                    assert m["tool_call_id"] in calls
            for r in telemetry["receipts"][:3]:
                original = ctxgc.receipt(messages, r["id"])["original"]
                assert json.loads(original) in messages
            checked += 1
    assert checked >= 20
