"""ctxgc.Chat: a history kept compiled between requests gives, after every message, what
compile_messages gives for the whole history (messages, counts, retired turns), on the
bundled fixtures and on real transcripts of the corpus."""

from __future__ import annotations

import copy
import json

import pytest

import ctxgc

from test_chat import AIRLINE, ANTHROPIC, TOOL_CHAT
from test_corpus import _records

#: The telemetry a Chat compile gives, each equal to compile_messages' value of that name.
LIGHT_KEYS = {
    "format", "tokens_before", "tokens_after", "tokenizer", "raw_token_count",
    "compiled_token_count", "tokens_saved", "compression_ratio_pct", "token_growth",
    "context_grew", "token_estimator", "retired_turn_indices", "retired_turn_count",
    "tool_payloads_compacted",
}


def assert_same(got, expected, where):
    messages, telemetry = got
    want_messages, want = expected
    assert messages == want_messages, where
    for key in LIGHT_KEYS:
        assert telemetry[key] == want[key], (where, key)
    if "system" in want:
        assert telemetry["system"] == want["system"], where


def replay_each_message(messages, *, preset="default", system=None, fmt=None):
    """Appends the messages one by one, comparing with a whole compile after each."""
    options = {"format": fmt} if fmt else {}
    chat = ctxgc.Chat(preset=preset, system=system, **options)
    for n, message in enumerate(messages):
        chat.append(message)
        expected = ctxgc.compile_messages(messages[: n + 1], preset, system=system, **options)
        assert_same(chat.compiled(), expected, (preset, n))
    assert len(chat) == len(messages)
    return chat


@pytest.mark.parametrize("preset", ["default", "lossless", "aggressive", "cache-stable", "eager"])
def test_every_step_of_the_bundled_chats_is_a_whole_compile(preset):
    for messages in (AIRLINE, TOOL_CHAT):
        replay_each_message(messages, preset=preset)


def test_bundled_fixture_files(fixtures):
    for line in (fixtures / "chat" / "corpus_samples.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            replay_each_message(record["messages"])
    airline = json.loads((fixtures / "chat" / "airline_cabin_change.json").read_text(encoding="utf-8"))
    messages = airline["messages"] if isinstance(airline, dict) else airline
    replay_each_message(messages)


def test_anthropic_histories_with_a_system_prompt():
    chat = replay_each_message(ANTHROPIC, system="You book tables.", fmt="anthropic")
    messages, telemetry = chat.compiled()
    assert telemetry["format"] == "anthropic"
    assert telemetry["system"][0] == {"type": "text", "text": "You book tables."}
    # Without a system prompt the register still gets one.
    chat = replay_each_message(ANTHROPIC, fmt="anthropic")
    assert "party_size = 3" in json.dumps(chat.compiled()[1]["system"])


def test_corpus_transcripts_step_by_step(corpus):
    checked = 0
    for name in ("tau-bench-airline-gpt4o.jsonl", "toolbench-examples.jsonl", "tau2-bench-leaderboard.jsonl",
                 "swe-agent-trajectories.jsonl"):
        for record in _records(corpus / name, 2):
            messages = record["messages"][:60]
            replay_each_message(messages)
            replay_each_message(messages, preset="cache-stable")
            checked += 1
    assert checked == 8


def test_a_resent_history_compiles_only_what_was_added(corpus):
    record = next(_records(corpus / "tau-bench-airline-gpt4o.jsonl", 1))
    messages = record["messages"]
    chat = ctxgc.Chat()
    history = []
    for message in messages:
        history.append(message)  # the same objects, as an agent loop sends them
        got = chat.compile(history)
        assert_same(got, ctxgc.compile_messages(history), len(history))
    assert len(chat) == len(messages)
    # A different list (an edited history) starts over and is still right.
    edited = copy.deepcopy(messages[:5])
    edited[2]["content"] = "changed"
    assert_same(chat.compile(edited), ctxgc.compile_messages(edited), "edited")
    assert len(chat) == 5
    # The last message changed in place is noticed too.
    edited[-1] = dict(edited[-1], content="again")
    assert_same(chat.compile(edited), ctxgc.compile_messages(edited), "last changed")


def test_results_are_deterministic_and_the_input_untouched():
    history = copy.deepcopy(TOOL_CHAT)
    first = ctxgc.Chat(history).compiled()
    second = ctxgc.Chat()
    second.extend(history)
    assert first[0] == second.compiled()[0]
    assert json.dumps(first[0]) == json.dumps(ctxgc.compile_messages(TOOL_CHAT)[0])
    assert history == TOOL_CHAT


def test_report_is_the_full_compile_messages_telemetry():
    chat = ctxgc.Chat(AIRLINE)
    report = chat.report()
    _, want = ctxgc.compile_messages(AIRLINE)
    assert report == want
    assert report["decisions"]


def test_an_empty_chat_compiles_to_nothing():
    messages, telemetry = ctxgc.Chat().compiled()
    assert messages == [] and telemetry["tokens_before"] == 0 and telemetry["tokens_after"] == 0


def test_bad_messages_are_refused_and_the_chat_stays_as_it_was():
    chat = ctxgc.Chat(AIRLINE[:3])
    before = chat.compiled()
    with pytest.raises(ctxgc.InputError) as err:
        chat.append({"content": "no role"})
    assert "item 3" in str(err.value) and "role" in str(err.value)
    with pytest.raises(ctxgc.InputError, match=r"messages\[3\].*set is not a JSON value"):
        chat.append({"role": "user", "content": {1, 2}})
    with pytest.raises(TypeError):
        chat.extend("not a list")
    assert len(chat) == 3
    assert chat.compiled()[0] == before[0]


def test_cache_stable_keeps_what_was_sent_and_the_declaration_in_view():
    # The register sits in the cached prefix; a state block waits in its message for a step.
    chat = ctxgc.Chat(preset="cache-stable")
    chat.extend([
        {"role": "user", "content": "Move me to business."},
        {"role": "assistant", "content": 'Done.<contextgc-state>{"assert": {"cabin": "business"}}</contextgc-state>'},
    ])
    first = chat.compiled()[0]
    chat.append({"role": "user", "content": "Thanks."})
    second = chat.compiled()[0]
    assert second[: len(first)] == first
    assert "business" in json.dumps(second)


def test_options_that_cannot_be_live_are_refused():
    with pytest.raises(ctxgc.UsageError):
        ctxgc.Chat(format="tracegc")
