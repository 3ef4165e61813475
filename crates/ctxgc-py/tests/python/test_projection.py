"""tracetrim's shape: learn, measure, report, trim, Projection and AutoTrim."""

from __future__ import annotations

import json

import pytest

import ctxgc


@pytest.fixture()
def billing(fixtures):
    return [fixtures / "projection" / f"billing-{n}.jsonl" for n in range(1, 6)]


def _charges_output(path) -> str:
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("tool") == "stripe_list_charges":
            return event["output"]
    raise AssertionError("no charge list in the fixture")


def test_tracetrim_quickstart_learn_review_apply_measure(billing, tmp_path):
    # 1-2: learn from recorded runs (paths, as `tracetrim report traces/*.jsonl`).
    projection = ctxgc.learn(billing)
    assert "stripe_list_charges" in projection.trimmed_tools
    reviewed = projection.to_dict()
    dropped = reviewed["tools"]["stripe_list_charges"]["drop"]
    assert dropped, reviewed
    # 3: the projection is plain JSON a person can review, save and load back.
    projection.save(tmp_path / "projection.json")
    loaded = ctxgc.Projection.load(tmp_path / "projection.json")
    assert loaded.to_json() == projection.to_json()
    # 4: apply it to a new output: fields the agent used stay, the rest is named in a footer.
    output = _charges_output(billing[0])
    trimmed = ctxgc.trim(loaded, "stripe_list_charges", output)
    assert trimmed["outcome"] == "trimmed"
    assert trimmed["tokens_after"] < trimmed["tokens_before"]
    assert "[hidden: " in trimmed["text"] and "expand ref" in trimmed["text"]
    for used in ("ch_009A7", "Your card was declined.", "4200"):
        assert used in trimmed["text"]
    assert trimmed["receipt"]["original"] == output
    assert projection.apply("stripe_list_charges", output) == trimmed["text"]
    assert ctxgc.trim(str(tmp_path / "projection.json"), "stripe_list_charges", output)["text"] == trimmed["text"]
    assert ctxgc.trim(projection.to_json(), "stripe_list_charges", output)["text"] == trimmed["text"]
    # Errors are never trimmed; unknown tools pass unchanged.
    for untouched in (projection.apply("stripe_list_charges", output, error=True), projection.apply("another_tool", output)):
        assert "[hidden:" not in untouched and json.loads(untouched) == json.loads(output)
    # 5: measure before trusting it (leave-one-out): no used field hidden on these runs.
    m = ctxgc.measure(billing)
    assert m["overall"]["calls_total"] == 15
    assert m["overall"]["misses"] == 0
    assert m["overall"]["removed_share"] > m["overall"]["reserialisation_share"]
    # The telemetry report, as a dict and a page.
    report = ctxgc.report(billing, title="billing", html=tmp_path / "report.html")
    assert "<html" in (tmp_path / "report.html").read_text().lower()
    assert any(t["tool"] == "stripe_list_charges" for t in report["tools"])


def test_learning_from_transcripts_in_memory():
    runs = []
    for i in range(3):
        out = json.dumps({"id": f"R{i}X", "status": "shipped", "carrier_notes": "left at the depot gate, rescheduled twice because the recipient was away, then handed to a neighbour " * 2, "eta": f"2024-06-0{i + 1}"})
        runs.append([
            {"role": "user", "content": "Where is my order?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "track", "arguments": '{"order": "A1"}'}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": out},
            {"role": "assistant", "content": f"It arrives on 2024-06-0{i + 1}."},
        ])
    projection = ctxgc.learn(runs, min_saving_tokens=0)
    assert projection.trimmed_tools == ["track"]
    text = projection.apply("track", {"id": "R9X", "status": "late", "carrier_notes": "the van broke down " * 5, "eta": "2024-06-09"})
    assert text.startswith('{"id":"R9X","eta":"2024-06-09"}')


def test_bad_traces_and_projections_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "call", "tool": "t", "arguments": {}}\n')
    with pytest.raises(ctxgc.InputError, match=r'(?s)bad.jsonl: .*item 0: field "output": missing'):
        ctxgc.learn([bad], format="tracetrim")
    with pytest.raises(ctxgc.InputError, match="missing.jsonl"):
        ctxgc.learn([tmp_path / "missing.jsonl"])
    with pytest.raises(ctxgc.InputError, match="projection"):
        ctxgc.Projection.from_json("{}")
    with pytest.raises(ctxgc.UsageError, match="max_used_share"):
        ctxgc.learn([bad], max_used_share=2)


def _order(i: int) -> dict:
    return {
        "order_id": f"A{i}9",
        "total": 105 + 10 * i,
        "warehouse_log": f"picked at bay {i} by the morning crew, packed by the night shift, scanned twice at the loading dock and weighed again before the truck left the depot",
    }


def test_autotrim_function_calling_example(tmp_path):
    # tracetrim's "Function calling, without MCP", three places in the agent's loop.
    tt = ctxgc.AutoTrim(tmp_path / "ctxgc-data", min_runs=3)
    tools = [{"type": "function", "function": tt.expand_tool}]
    assert tools[0]["function"]["name"] == "expand"
    shown = []
    for i in range(4):
        result = tt.output("get_order", {"id": "A1"}, json.dumps(_order(i)))  # 2. every tool call
        shown.append(result)
        summary = tt.done(f"Your order total is {105 + 10 * i}.")  # 3. the run is over
    assert all(s == json.dumps(_order(i)) for i, s in enumerate(shown[:3]))
    assert "[hidden: warehouse_log" in shown[3] and summary["trimming"] is True
    assert tt.is_trimming and tt.runs_learned == 4
    reference = shown[3].split('expand ref "')[1].split('"')[0]
    assert tt.expand({"ref": reference, "fields": ["*"]}) == json.dumps(_order(3))
    assert json.loads(tt.expand(reference, ["warehouse_log"])) == {"warehouse_log": _order(3)["warehouse_log"]}
    assert tt.expand(json.dumps({"ref": reference})) == json.dumps(_order(3))
    with pytest.raises(ctxgc.ExpandError, match="no trimmed output has reference"):
        tt.expand("zzzzzzzzzz")
    with pytest.raises(ctxgc.ExpandError, match="has no field"):
        tt.expand(reference, ["nope"])
    assert (tmp_path / "ctxgc-data" / "report.html").is_file()
    assert tt.report["tools"]
    # Learning and the originals survive a restart (the work directory keeps both).
    again = ctxgc.AutoTrim(tmp_path / "ctxgc-data")
    assert again.runs_learned == 4 and again.is_trimming
    assert again.expand(reference) == json.dumps(_order(3))
    # output(tool, result), without arguments, and results given as values.
    trimmed = again.output("get_order", _order(7))
    assert "[hidden: warehouse_log" in trimmed
    with pytest.raises(ctxgc.UsageError, match="output"):
        again.output("get_order")


def test_autotrim_in_memory_backs_off_a_tool_the_agent_keeps_expanding():
    tt = ctxgc.AutoTrim(min_runs=3, min_trimmed_to_judge=1, max_expand_share=0.25)
    for i in range(3):
        tt.output("get_order", {"id": "A1"}, json.dumps(_order(i)))
        tt.done(f"Your order total is {105 + 10 * i}.")
    assert tt.is_trimming
    for i in range(3, 6):
        text = tt.output("get_order", json.dumps(_order(i)))
        if "[hidden:" in text:
            tt.expand(text.split('expand ref "')[1].split('"')[0])
        tt.done(f"Total {105 + 10 * i}.")
    assert "asked back 1 of its 1 trimmed outputs" in tt.disabled_tools["get_order"]
    assert tt.tool_stats["get_order"]["expanded"] == 1
    # Once backed off, outputs pass whole.
    assert tt.output("get_order", json.dumps(_order(9))) == json.dumps(_order(9))
    assert tt.workdir is None
