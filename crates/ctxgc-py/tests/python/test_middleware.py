"""wrap(): the real openai and anthropic SDKs against a fake provider on loopback, sync,
async and streaming; the compiled history is what reaches the provider."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys

import pytest

import ctxgc

from test_chat import AIRLINE, ANTHROPIC, TOOL_CHAT

REPLY = "The value of x is 20."


def openai_client(provider, cls_name="OpenAI"):
    import openai

    return getattr(openai, cls_name)(api_key="sk-test", base_url=provider.url + "/v1", max_retries=0)


def anthropic_client(provider, cls_name="Anthropic"):
    import anthropic

    return getattr(anthropic, cls_name)(api_key="sk-test", base_url=provider.url, max_retries=0)


def test_importing_ctxgc_imports_neither_sdk():
    out = subprocess.run(
        [sys.executable, "-c", "import sys, ctxgc; print('openai' in sys.modules, 'anthropic' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.split() == ["False", "False"]


def test_openai_sync_create_sends_the_compiled_history(provider):
    raw = openai_client(provider)
    seen = []
    client = ctxgc.wrap(raw, on_compile=seen.append)
    history = copy.deepcopy(AIRLINE)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=history)
    assert reply.choices[0].message.content == REPLY
    expected, telemetry = ctxgc.compile_messages(AIRLINE, "cache-stable", format="openai-chat")
    assert provider.requests[-1]["body"]["messages"] == expected
    assert provider.requests[-1]["body"]["model"] == "gpt-4o-mini"
    # The conversation is kept compiled (a ctxgc.Chat): its telemetry holds the counts and
    # retired turns, each as compile_messages gives it.
    assert client.last_telemetry is seen[-1]
    for key in ("tokens_before", "tokens_after", "tokens_saved", "retired_turn_indices", "format"):
        assert seen[-1][key] == telemetry[key], key
    assert history == AIRLINE  # the caller's list is untouched
    # The client itself is not modified; other attributes are the client's own.
    raw.chat.completions.create(model="m", messages=AIRLINE)
    assert provider.requests[-1]["body"]["messages"] == AIRLINE
    assert client.api_key == "sk-test" and client.unwrapped is raw
    # A per-request bypass.
    client.chat.completions.create(model="m", messages=AIRLINE, ctxgc=False)
    assert provider.requests[-1]["body"]["messages"] == AIRLINE


def test_openai_sync_streaming(provider):
    client = ctxgc.wrap(openai_client(provider))
    stream = client.chat.completions.create(model="m", messages=TOOL_CHAT, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == REPLY
    sent = provider.requests[-1]["body"]
    assert sent["stream"] is True
    assert sent["messages"] == ctxgc.compile_messages(TOOL_CHAT, "cache-stable", format="openai-chat")[0]
    assert sent["messages"] != TOOL_CHAT


def test_openai_stream_helper(provider):
    # The default preset takes every decision at once, so the register is there at once.
    client = ctxgc.wrap(openai_client(provider), preset="default")
    with client.chat.completions.stream(model="m", messages=AIRLINE) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == REPLY
    assert provider.requests[-1]["body"]["messages"][1]["content"].startswith("[ACTIVE_AGENT_STATE]")


def test_openai_async_create_and_stream(provider):
    client = ctxgc.wrap(openai_client(provider, "AsyncOpenAI"))

    async def main():
        reply = await client.chat.completions.create(model="m", messages=AIRLINE)
        stream = await client.chat.completions.create(model="m", messages=TOOL_CHAT, stream=True)
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        await client.close()
        return reply, "".join(parts)

    reply, streamed = asyncio.run(main())
    assert reply.choices[0].message.content == REPLY and streamed == REPLY
    bodies = [r["body"] for r in provider.requests]
    assert bodies[0]["messages"] == ctxgc.compile_messages(AIRLINE, "cache-stable", format="openai-chat")[0]
    assert bodies[1]["messages"] == ctxgc.compile_messages(TOOL_CHAT, "cache-stable", format="openai-chat")[0]


def test_openai_responses_input_is_compiled(provider):
    client = ctxgc.wrap(openai_client(provider))
    items = [
        {"type": "message", "role": "system", "content": "You help with orders."},
        {"type": "message", "role": "user", "content": "Where is order 42?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_order", "arguments": '{"id": 42}'},
        {"type": "function_call_output", "call_id": "call_1", "output": TOOL_CHAT[3]["content"]},
    ]
    reply = client.responses.create(model="m", input=items)
    assert reply.output_text == REPLY
    sent = provider.requests[-1]["body"]["input"]
    assert sent == ctxgc.compile_messages(items, "cache-stable", format="responses")[0]
    assert sent[3]["output"] != items[3]["output"]  # the bulky JSON output was compacted
    assert client.last_telemetry["format"] == "responses"


def test_anthropic_sync_create_puts_the_register_in_the_system_prompt(provider):
    client = ctxgc.wrap(anthropic_client(provider), preset="default")
    reply = client.messages.create(model="claude-x", max_tokens=100, system="You book tables.", messages=ANTHROPIC)
    assert reply.content[0].text == REPLY
    body = provider.requests[-1]["body"]
    expected, telemetry = ctxgc.compile_messages(ANTHROPIC, system="You book tables.", format="anthropic")
    assert body["messages"] == expected
    assert body["system"] == telemetry["system"]
    assert body["system"][0] == {"type": "text", "text": "You book tables."}
    assert "party_size = 3" in body["system"][1]["text"]
    # Without a system prompt the register still reaches the model.
    client.messages.create(model="claude-x", max_tokens=100, messages=ANTHROPIC)
    assert "party_size = 3" in json.dumps(provider.requests[-1]["body"]["system"])


def test_anthropic_streaming(provider):
    client = ctxgc.wrap(anthropic_client(provider))
    with client.messages.stream(model="claude-x", max_tokens=100, messages=ANTHROPIC) as stream:
        text = "".join(stream.text_stream)
    assert text == REPLY
    stream = client.messages.create(model="claude-x", max_tokens=100, messages=ANTHROPIC, stream=True)
    events = [event.type for event in stream]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    for request in provider.requests:
        assert request["body"]["messages"] == ctxgc.compile_messages(ANTHROPIC, "cache-stable", format="anthropic")[0]


def test_anthropic_async_create_and_stream(provider):
    client = ctxgc.wrap(anthropic_client(provider, "AsyncAnthropic"), preset="default")

    async def main():
        reply = await client.messages.create(model="c", max_tokens=10, messages=ANTHROPIC)
        async with client.messages.stream(model="c", max_tokens=10, messages=ANTHROPIC) as stream:
            text = "".join([t async for t in stream.text_stream])
        await client.close()
        return reply.content[0].text, text

    assert asyncio.run(main()) == (REPLY, REPLY)
    for request in provider.requests:
        assert "party_size = 3" in json.dumps(request["body"]["system"])


def test_wrap_checks_what_it_is_given():
    with pytest.raises(TypeError, match="openai or anthropic client"):
        ctxgc.wrap(object())
    import openai

    with pytest.raises(ctxgc.UsageError, match="unknown preset"):
        ctxgc.wrap(openai.OpenAI(api_key="k"), preset="tiny")


def test_a_wrapped_loop_compiles_cache_stable_unless_told_otherwise(provider):
    """A wrapped client serves a loop, as the gateway does: by default what it sent stays a
    byte-identical prefix of the next request; preset="default" takes every decision at once."""
    client = ctxgc.wrap(openai_client(provider))
    history = []
    sent = []
    for message in AIRLINE:
        history.append(message)
        client.chat.completions.create(model="m", messages=history)
        sent.append(provider.requests[-1]["body"]["messages"])
    for earlier, later in zip(sent, sent[1:]):
        assert later[: len(earlier)] == earlier
    assert sent[-1] == ctxgc.compile_messages(AIRLINE, "cache-stable")[0]
    # No step yet: the declared state is still where the agent wrote it, in view.
    assert "<contextgc-state>" in json.dumps(sent[-1])
    assert "[ACTIVE_AGENT_STATE]" not in json.dumps(sent[-1])
    eager = ctxgc.wrap(openai_client(provider), preset="default")
    eager.chat.completions.create(model="m", messages=AIRLINE)
    assert provider.requests[-1]["body"]["messages"] == ctxgc.compile_messages(AIRLINE)[0]


def test_a_growing_conversation_sends_what_a_whole_compile_gives_at_every_request(provider):
    """The loop a wrapped client serves: one history appended to and sent again, twice over
    (two conversations interleaved), each request as compile_messages would compile it."""
    client = ctxgc.wrap(openai_client(provider))
    first, second = [], []
    for n in range(len(TOOL_CHAT)):
        for history, source in ((first, TOOL_CHAT), (second, AIRLINE[: len(TOOL_CHAT)])):
            history.append(source[n])
            client.chat.completions.create(model="m", messages=history)
            assert provider.requests[-1]["body"]["messages"] == ctxgc.compile_messages(history, "cache-stable")[0]
    # An edited history is compiled afresh.
    edited = copy.deepcopy(first)
    edited[1] = dict(edited[1], content="Something else entirely.")
    client.chat.completions.create(model="m", messages=edited)
    assert provider.requests[-1]["body"]["messages"] == ctxgc.compile_messages(edited, "cache-stable")[0]
