"""TraceGC's shape: TraceGC (memory, SQLite, PostgreSQL), compact_events, get_receipt and
call_*_with_compaction."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

import ctxgc

QUICK_START = [
    {"id": "e001", "type": "decision", "timestamp": 1000, "parent_id": None, "content": "Start config"},
    {"id": "e002", "type": "set_var", "timestamp": 1010, "parent_id": "e001", "key": "x", "value": 10},
    {"id": "e003", "type": "set_var", "timestamp": 1020, "parent_id": "e002", "key": "x", "value": 20},
]


def test_tracegc_readme_quick_start():
    client = ctxgc.TraceGC()
    for event in QUICK_START:
        client.add_event(event)
    result = client.compact()
    # TraceGC's README: the prompt holds x = 20 and a receipt for e002.
    assert result["prompt"] == "[e001] decision: Start config\n[receipt e002: superseded by e003]\n[e003] x = 20\n"
    assert result["pruned_ids"] == ["e002"]
    # Exact o200k_base counts of the prompt without compaction and of the compacted prompt
    # (on an example this small the stub costs about what it replaces).
    assert result["tokens_before"] > 0 and result["tokens_after"] > 0
    assert result["tokenizer"] == "o200k_base"
    assert [r["id"] for r in result["receipts"]] == ["e002"]
    receipt = result["receipts"][0]
    assert receipt["reason"] == "superseded-var" and receipt["by"] == ["e003"]
    assert receipt["event"] == QUICK_START[1]
    assert [e["id"] for e in result["compact_events"]] == ["e001", "e003"]
    # get_receipt gives the original event back, unchanged.
    assert client.get_receipt("e002") == QUICK_START[1]
    assert client.decision("e002") == {"id": "e002", "action": "retire", "reason": "superseded-var", "by": ["e003"]}
    assert len(client) == 3 and client.events == QUICK_START


def test_incremental_and_single_shot_agree(examples):
    text = (examples / "coding-session.jsonl").read_text()
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    whole = ctxgc.compact_events(events)
    live = ctxgc.TraceGC()
    for n, event in enumerate(events, 1):
        live.add_event(event)
        # Every result of a live session, kept up to date event by event, is the result of
        # compacting what it holds at once: prompt, counts, decisions, receipts, everything.
        assert live.compact() == ctxgc.compact_events(events[:n]), f"after {n} events"
    assert live.compact() == whole
    # The bundled example compiles as the README shows.
    assert "[receipts e16 e17: duplicate of e13 e14; e18: repeated by e19]\n" in whole["prompt"]
    assert whole["prompt"].startswith("[e01] requirement: GET /users/{id} must answer in under 50 ms\n")
    # Text input keeps every byte: the receipt is the line as written.
    from_text = ctxgc.compact_events(text)
    assert from_text["prompt"] == whole["prompt"]
    e02 = [line for line in text.splitlines() if '"e02"' in line][0]
    raw = ctxgc.TraceGC()
    raw.add_events(text.splitlines())
    assert raw.get_receipt("e02", raw=True) == e02


def test_live_results_stay_exact_over_a_long_generated_trace(tmp_path):
    events = []
    parent = None
    for i in range(600):
        kind = i % 5
        eid = f"e{i}"
        if kind == 0:
            event = {"id": eid, "type": "set_var", "key": f"k{i % 13}", "value": i}
        elif kind == 1:
            event = {"id": eid, "type": "tool_call", "tool_name": "search", "arguments": {"q": f"q{i % 7}"}}
        elif kind == 2:
            event = {"id": eid, "type": "tool_result", "call_id": f"e{i - 1}", "result": {"hits": i % 7}}
        elif kind == 3:
            event = {"id": eid, "type": "file_read", "path": f"src/m{i % 9}.py"}
        else:
            event = {"id": eid, "type": "file_edit", "path": f"src/m{i % 9}.py", "diff_hash": f"h{i}"}
        event.update(parent_id=parent, timestamp=i)
        parent = eid
        events.append(event)
    memory = ctxgc.TraceGC()
    stored = ctxgc.TraceGC(db=tmp_path / "live.db", context_id="long")
    for n, event in enumerate(events, 1):
        memory.add_event(event)
        stored.add_event(event)
        if n % 37 == 0 or n == len(events):
            expected = ctxgc.compact_events(events[:n])
            assert memory.compact() == expected, f"memory, after {n} events"
            assert stored.compact() == expected, f"SQLite, after {n} events"
    # The shared objects were not changed by a later result.
    first = memory.compact()
    memory.add_event({"id": "last", "type": "set_var", "key": "k0", "value": -1, "parent_id": parent, "timestamp": 600})
    memory.compact()
    assert first == expected


def test_tracegc_fixture_format_and_retention(examples):
    fixture = json.loads((examples / "bench" / "customer_support_medium.json").read_text())
    result = ctxgc.compact_events(fixture)
    assert result["pruned_ids"] and result["tokens_after"] < result["tokens_before"]
    protected = [
        {"id": "a", "type": "set_var", "timestamp": 1, "key": "k", "value": 1, "importance": "critical"},
        {"id": "b", "type": "set_var", "timestamp": 2, "key": "k", "value": 2},
    ]
    result = ctxgc.compact_events(protected)
    assert result["pruned_ids"] == [] and result["protected_ids"] == ["a"]
    result = ctxgc.compact_events(protected, protect_importance=11)
    assert result["pruned_ids"] == ["a"]


def test_bad_events_are_refused_whole_with_the_cli_messages():
    client = ctxgc.TraceGC()
    client.add_event(QUICK_START[0])
    with pytest.raises(ctxgc.InputError) as err:
        client.add_event({"id": "e9", "type": "file_read", "timestamp": 1})
    assert str(err.value) == '1 invalid item(s):\n  item 1 (id "e9"): field "path": missing required field'
    with pytest.raises(ctxgc.InputError, match='field "parent_id": names no event: "nope"'):
        client.add_event({"id": "e9", "type": "decision", "timestamp": 2, "parent_id": "nope", "content": "c"})
    with pytest.raises(ctxgc.InputError, match='duplicate id "e001"'):
        client.add_event(dict(QUICK_START[0]))
    with pytest.raises(ctxgc.InputError, match="item 2"):
        client.add_events([QUICK_START[1], {"id": "x", "type": "bogus", "timestamp": 1}])
    assert len(client) == 1  # nothing of a refused batch was appended
    with pytest.raises(ctxgc.InputError, match="malformed JSON"):
        client.add_event('{"id": ')
    with pytest.raises(ctxgc.UsageError, match='no item with id "zz"'):
        client.get_receipt("zz")
    with pytest.raises(TypeError):
        client.add_event(3)
    with pytest.raises(ctxgc.InputError, match="expected integer"):
        ctxgc.compact_events([{"id": "c", "type": "command_run", "timestamp": 1, "command": "ls", "exit_code": "0"}])
    with pytest.raises(ctxgc.UsageError, match="unknown tokenizer"):
        ctxgc.compact_events([], tokenizer="gpt2")


def _stored_round_trip(db: str) -> None:
    context = f"session-{uuid.uuid4().hex}"
    client = ctxgc.TraceGC(db=db, context_id=context)
    client.add_event({"id": "e001", "type": "set_var", "timestamp": 1000, "key": "model", "value": "v1"})
    client.add_event({"id": "e002", "type": "set_var", "timestamp": 2000, "key": "model", "value": "v2"})
    first = client.compact()
    del client
    # Another client (here: another process) reopens the same session and carries on.
    script = (
        "import ctxgc, json, sys\n"
        "c = ctxgc.TraceGC(db=sys.argv[1], context_id=sys.argv[2])\n"
        "c.add_event({'id': 'e003', 'type': 'set_var', 'timestamp': 3000, 'key': 'model', 'value': 'v3'})\n"
        "print(json.dumps(c.compact()['pruned_ids']))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, db, context], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["e001", "e002"]
    reloaded = ctxgc.TraceGC(db=db, context_id=context)
    result = reloaded.compact()
    assert result["prompt"].endswith("[e003] model = v3\n")
    assert first["prompt"] == "[receipt e001: superseded by e002]\n[e002] model = v2\n"
    assert reloaded.get_receipt("e001") == {"id": "e001", "type": "set_var", "timestamp": 1000, "key": "model", "value": "v1"}
    assert len(reloaded) == 3


def test_tracegc_readme_sqlite_store(tmp_path):
    _stored_round_trip(str(tmp_path / "agent_history.db"))
    client = ctxgc.TraceGC(db=tmp_path / "other.db")
    assert client.context_id == "default" and client.db == str(tmp_path / "other.db")


def test_postgresql_store(postgres_url):
    _stored_round_trip(postgres_url)


def test_an_unreachable_database_is_a_store_error():
    with pytest.raises(ctxgc.StoreError) as err:
        ctxgc.TraceGC(db="postgres://app:s3cret@127.0.0.1:1/ctx")
    assert "s3cret" not in str(err.value)


def test_call_openai_with_compaction(provider):
    import openai

    client = ctxgc.TraceGC()
    client.add_event({"id": "e1", "type": "set_var", "timestamp": 1000, "parent_id": None, "key": "x", "value": 10})
    client.add_event({"id": "e2", "type": "set_var", "timestamp": 1010, "parent_id": "e1", "key": "x", "value": 20})
    res = ctxgc.call_openai_with_compaction(
        tracegc=client,
        model="gpt-4o-mini",
        user_message="Explain what value x holds.",
        client=openai.OpenAI(api_key="sk-test", base_url=provider.url + "/v1"),
    )
    assert res["response_text"] == "The value of x is 20."
    assert res["metrics"]["input_tokens"] == 11 and res["metrics"]["output_tokens"] == 7
    assert res["metrics"]["tokens_after"] == client.compact()["tokens_after"]
    sent = provider.requests[-1]["body"]["messages"]
    assert sent[0] == {"role": "system", "content": "[receipt e1: superseded by e2]\n[e2] x = 20\n"}
    assert sent[1] == {"role": "user", "content": "Explain what value x holds."}
    # base_url and api_key make a client when none is given.
    res = ctxgc.call_openai_with_compaction(client, "m", "again", api_key="sk-test", base_url=provider.url + "/v1")
    assert res["pruned_ids"] == ["e1"]


def test_call_anthropic_with_compaction(provider):
    client = ctxgc.TraceGC()
    client.add_events(QUICK_START)
    res = ctxgc.call_anthropic_with_compaction(client, "claude-x", "What is x?", api_key="k", base_url=provider.url)
    assert res["response_text"] == "The value of x is 20."
    body = provider.requests[-1]["body"]
    assert body["system"] == client.compact()["prompt"] and body["max_tokens"] == 1024


def test_threads_share_one_session():
    import threading

    client = ctxgc.TraceGC()
    errors = []

    def writer(t: int) -> None:
        try:
            for i in range(50):
                client.add_event({"id": f"t{t}-{i}", "type": "set_var", "timestamp": i, "key": f"k{t}", "value": i})
                if i % 10 == 0:
                    client.compact()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(client) == 200
    result = client.compact()
    # Per key, only the latest value survives.
    assert sorted(e["id"] for e in result["compact_events"]) == [f"t{t}-49" for t in range(4)]
