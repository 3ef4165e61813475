"""compile_messages, compile and receipt: contextgc's shape over the ctxgc compiler."""

from __future__ import annotations

import json
import math
import threading

import pytest

import ctxgc

AIRLINE = [
    {"role": "system", "content": "You are an airline support agent."},
    {"role": "user", "content": "I need to change the cabin on reservation 0U4NPP. I am in economy class."},
    {
        "role": "assistant",
        "content": 'Confirming reservation 0U4NPP.\n<contextgc-state>{"assert": {"active_reservation": "0U4NPP", "cabin_class": "economy"}}</contextgc-state>',
    },
    {"role": "user", "content": "Upgrade me to business class."},
    {
        "role": "assistant",
        "content": 'Upgrading you now.\n<contextgc-state>{"assert": {"cabin_class": "business"}}</contextgc-state>',
    },
    {"role": "user", "content": "Actually, keep it in economy, I changed my mind."},
    {
        "role": "assistant",
        "content": 'Reverting to economy.\n<contextgc-state>{"assert": {"cabin_class": "economy"}}</contextgc-state>',
    },
    {"role": "user", "content": "Thanks."},
]


def test_contextgc_readme_airline_example_keeps_the_value_that_survived():
    messages, telemetry = ctxgc.compile_messages(AIRLINE)
    # The register states the surviving values, right after the untouched system prompt.
    assert messages[0] == AIRLINE[0]
    assert messages[1]["role"] == "system"
    assert messages[1]["content"].startswith("[ACTIVE_AGENT_STATE]")
    assert 'cabin_class = "economy" (m6, declared)' in messages[1]["content"]
    assert 'active_reservation = "0U4NPP" (m2, declared)' in messages[1]["content"]
    # The business upgrade is gone; every user turn stays; no state block reaches the model.
    contents = [m["content"] for m in messages]
    assert "Upgrading you now." not in " ".join(contents)
    for m in AIRLINE:
        if m["role"] == "user":
            assert m in messages
    assert not any("contextgc-state" in c for c in contents)
    # Telemetry: contextgc's names and ctxgc's report agree.
    assert telemetry["retired_turn_count"] == 1
    assert telemetry["retired_turn_indices"] == [4]
    assert telemetry["raw_token_count"] == telemetry["tokens_before"] == 139
    assert telemetry["compiled_token_count"] == telemetry["tokens_after"] == 100
    assert telemetry["tokens_saved"] == 39
    assert telemetry["compression_ratio_pct"] == 28.1
    assert telemetry["context_grew"] is False
    assert telemetry["token_estimator"] == "exact BPE (o200k_base)"
    register = {e["key"]: e["value"] for e in telemetry["chat"]["register"]}
    assert register == {"active_reservation": "0U4NPP", "cabin_class": "economy"}
    assert telemetry["chat"]["validation"]["ok"] is True
    assert telemetry["chat"]["orphan_check"]["ok"] is True
    assert [r["id"] for r in telemetry["receipts"]] == ["m2", "m4", "m6"]


def test_the_caller_list_is_never_modified_and_output_is_deterministic():
    before = json.dumps(AIRLINE)
    first = ctxgc.compile_messages(AIRLINE)
    second = ctxgc.compile_messages(AIRLINE)
    assert json.dumps(AIRLINE) == before
    assert json.dumps(first) == json.dumps(second)


def test_compiling_the_output_again_changes_nothing():
    once, _ = ctxgc.compile_messages(AIRLINE)
    twice, telemetry = ctxgc.compile_messages(once)
    assert twice == once
    assert telemetry["tokens_saved"] == 0


def test_a_schema_as_a_dict_flags_values_that_break_it():
    schema = {"keys": {"cabin_class": {"type": "string", "enum": ["economy", "first"]}}}
    _, telemetry = ctxgc.compile_messages(AIRLINE, preset="default", schema=schema)
    flagged = [d for d in telemetry["chat"]["declarations"] if "business" in json.dumps(d)]
    assert flagged, telemetry["chat"]["declarations"]
    with pytest.raises(ctxgc.UsageError, match="schema"):
        ctxgc.compile_messages(AIRLINE, schema={"keys": 3})


TOOL_CHAT = [
    {"role": "system", "content": "You help with orders."},
    {"role": "user", "content": "Where is order 42?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"id": 42}'}}
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": json.dumps({"id": 42, "status": "shipped", "items": [{"sku": f"S{i}", "qty": i} for i in range(8)]}, indent=2),
    },
    {"role": "assistant", "content": "Order 42 has shipped."},
]


def test_tool_outputs_are_compacted_and_calls_keep_their_results():
    messages, telemetry = ctxgc.compile_messages(TOOL_CHAT)
    assert telemetry["tool_payloads_compacted"] == 1
    assert telemetry["tokens_after"] < telemetry["tokens_before"]
    tool = [m for m in messages if m["role"] == "tool"]
    assert len(tool) == 1 and tool[0]["tool_call_id"] == "call_1"
    # Plain notation, lists of records as header + rows: every value still there, once.
    assert tool[0]["content"] == (
        "{id:42,status:shipped,items:{columns:[sku,qty],rows:"
        "[[S0,0],[S1,1],[S2,2],[S3,3],[S4,4],[S5,5],[S6,6],[S7,7]]}}"
    )
    # The original is recoverable byte for byte.
    rid = [r["id"] for r in telemetry["receipts"]][0]
    got = ctxgc.receipt(TOOL_CHAT, rid)
    assert json.loads(got["original"]) == TOOL_CHAT[3]
    assert got["decision"]["reason"] == "compact-json"


def test_lossless_preset_and_keep_tools():
    _, telemetry = ctxgc.compile_messages(TOOL_CHAT, preset="lossless")
    assert telemetry["chat"]["preset"] == "lossless"
    messages, telemetry = ctxgc.compile_messages(TOOL_CHAT, keep_tools=["get_*"])
    assert messages == TOOL_CHAT
    assert telemetry["tool_payloads_compacted"] == 0


ANTHROPIC = [
    {"role": "user", "content": "Book the table for two."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": 'Booked.<contextgc-state>{"assert": {"party_size": 2}}</contextgc-state>'}
        ],
    },
    {"role": "user", "content": "Make it three."},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": 'Done.<contextgc-state>{"assert": {"party_size": 3}}</contextgc-state>'}],
    },
    {"role": "user", "content": "Thanks"},
]


def test_anthropic_lists_with_a_system_prompt_give_back_the_system_to_send():
    messages, telemetry = ctxgc.compile_messages(ANTHROPIC, system="You book tables.")
    assert telemetry["format"] == "anthropic"
    system = telemetry["system"]
    # The system prompt's text is unchanged; the register is an extra block after it.
    assert system[0] == {"type": "text", "text": "You book tables."}
    assert "party_size = 3" in system[1]["text"]
    assert all(m["role"] in ("user", "assistant") for m in messages)
    assert not any("contextgc-state" in json.dumps(m) for m in messages)


def test_anthropic_lists_without_a_system_prompt_get_one_for_the_register():
    messages, telemetry = ctxgc.compile_messages(ANTHROPIC, format="anthropic")
    assert "party_size = 3" in json.dumps(telemetry["system"])
    assert messages[0] == ANTHROPIC[0]


def test_a_request_dict_comes_back_as_a_request_dict():
    request = {"model": "claude-x", "max_tokens": 100, "system": "You book tables.", "messages": ANTHROPIC}
    out, telemetry = ctxgc.compile_messages(request)
    assert out["model"] == "claude-x" and out["max_tokens"] == 100
    assert isinstance(out["system"], list) and isinstance(out["messages"], list)
    text = json.dumps(request)
    out_text, _ = ctxgc.compile_messages(text)
    assert out_text == out


def test_errors_name_the_item_and_field():
    with pytest.raises(ctxgc.InputError) as err:
        ctxgc.compile_messages([{"role": "user", "content": "hi"}, {"content": "no role"}])
    assert "item 1" in str(err.value) and "role" in str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, ctxgc.Error)
    with pytest.raises(ctxgc.InputError, match=r'messages\[0\]\["content"\]: NaN is not a JSON number'):
        ctxgc.compile_messages([{"role": "user", "content": math.nan}])
    with pytest.raises(ctxgc.InputError, match=r"messages\[0\]: keys must be strings, found int key 1"):
        ctxgc.compile_messages([{1: "x"}])
    with pytest.raises(ctxgc.InputError, match="set is not a JSON value"):
        ctxgc.compile_messages([{"role": "user", "content": {1, 2}}])
    with pytest.raises(ctxgc.InputError, match="malformed JSON"):
        ctxgc.compile_messages('[{"role": "user", "content": "hi"')
    with pytest.raises(ctxgc.UsageError, match='unknown preset "tiny"'):
        ctxgc.compile_messages(AIRLINE, preset="tiny")
    with pytest.raises(ctxgc.UsageError, match="compact_events"):
        ctxgc.compile_messages([{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1}])
    with pytest.raises(TypeError, match="messages: expected"):
        ctxgc.compile_messages(42)
    looped: list = []
    looped.append(looped)
    with pytest.raises(ctxgc.InputError, match="nested more than"):
        ctxgc.compile_messages([{"role": "user", "content": looped}])


def test_pydantic_models_from_the_sdks_are_written_as_the_sdks_send_them():
    from anthropic.types import TextBlock

    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [TextBlock(type="text", text="Hello there.")]},
        {"role": "user", "content": "Bye"},
    ]
    messages, _ = ctxgc.compile_messages(history, format="anthropic")
    assert messages[1]["content"] == [{"type": "text", "text": "Hello there."}]


def test_compile_reports_like_the_command_line():
    report = ctxgc.compile(AIRLINE)
    assert isinstance(report["output"], str)
    assert json.loads(report["output"])[1]["content"].startswith("[ACTIVE_AGENT_STATE]")
    assert [d["action"] for d in report["decisions"]].count("retire") == 1
    with pytest.raises(ctxgc.UsageError, match="no item with id"):
        ctxgc.receipt(AIRLINE, "m99")


def test_the_gil_is_released_while_compiling(corpus):
    # A long compile on one thread; the main thread keeps running Python meanwhile.
    line = (corpus / "tau2-bench-leaderboard.jsonl").read_text().splitlines()[0]
    history = json.loads(line)["messages"] * 20
    history = [m for m in history if m.get("role") in ("user", "assistant", "system") and isinstance(m.get("content"), str)]
    done = threading.Event()
    result = {}

    def work():
        result["out"] = ctxgc.compile_messages(history, preset="lossless")
        done.set()

    steps = 0
    worker = threading.Thread(target=work)
    worker.start()
    while not done.is_set():
        steps += 1
        sum(range(50))
    worker.join()
    assert result["out"][1]["tokens_before"] > 0
    # Had the compile held the GIL, this loop could only have run between switch intervals.
    assert steps > 1000, steps
