"""The official OpenAI and Anthropic SDKs as clients of the gateway.

Usage: sdk_clients.py GATEWAY_BASE_URL

Each SDK is pointed at the gateway by its base URL and nothing else, and runs every call
shape an agent uses: Chat Completions, Responses and Messages, streamed and not, plus a
rate-limited call. Prints one JSON object with what each call returned.
"""

import json
import sys

import anthropic
import openai

base = sys.argv[1]
OPENAI_KEY = "sk-test-openai-3f9c"
ANTHROPIC_KEY = "sk-ant-test-77ab"

oa = openai.OpenAI(base_url=base + "/v1", api_key=OPENAI_KEY, max_retries=0)
an = anthropic.Anthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0)

# A tool output pretty-printed with indentation: the compiler re-encodes it compactly.
rows = [{"flight": f"HAT{100 + i}", "origin": "JFK", "destination": "SFO", "price": 300 + i} for i in range(12)]
tool_output = json.dumps(rows, indent=4)

chat_messages = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Find flights."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": tool_output},
    {"role": "user", "content": "chat-plain"},
]

out = {}

r = oa.chat.completions.create(model="fake-model", messages=chat_messages)
out["chat"] = r.choices[0].message.content
out["chat_usage"] = r.usage.prompt_tokens

chat_stream = list(chat_messages[:-1]) + [{"role": "user", "content": "chat-stream"}]
parts = []
usage = None
for chunk in oa.chat.completions.create(
    model="fake-model", messages=chat_stream, stream=True, stream_options={"include_usage": True}
):
    if chunk.usage is not None:
        usage = chunk.usage.prompt_tokens
    for choice in chunk.choices:
        if choice.delta.content:
            parts.append(choice.delta.content)
out["chat_stream"] = "".join(parts)
out["chat_stream_usage"] = usage

r = oa.responses.create(model="fake-model", input=[{"role": "user", "content": "responses-plain"}])
out["responses"] = r.output_text

parts = []
kinds = []
for event in oa.responses.create(
    model="fake-model", input=[{"role": "user", "content": "responses-stream"}], stream=True
):
    kinds.append(event.type)
    if event.type == "response.output_text.delta":
        parts.append(event.delta)
out["responses_stream"] = "".join(parts)
out["responses_stream_events"] = kinds

anthropic_messages = [
    {"role": "user", "content": "Find flights."},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": tool_output}]},
    {"role": "assistant", "content": "Here are the flights."},
    {"role": "user", "content": "messages-plain"},
]
m = an.messages.create(
    model="fake-model", max_tokens=64, system="You are a travel agent.", messages=anthropic_messages
)
out["messages"] = m.content[0].text
out["messages_usage"] = [m.usage.input_tokens, m.usage.cache_read_input_tokens]

stream_messages = anthropic_messages[:-1] + [{"role": "user", "content": "messages-stream"}]
with an.messages.stream(
    model="fake-model", max_tokens=64, system="You are a travel agent.", messages=stream_messages
) as s:
    text = "".join(s.text_stream)
    final = s.get_final_message()
out["messages_stream"] = text
out["messages_stream_final"] = final.content[0].text
out["messages_stream_usage"] = [final.usage.input_tokens, final.usage.output_tokens]

raw_events = []
for event in an.messages.create(
    model="fake-model", max_tokens=64, messages=[{"role": "user", "content": "raw-stream"}], stream=True
):
    raw_events.append(event.type)
out["messages_raw_events"] = raw_events

try:
    oa.chat.completions.create(model="rate-limited", messages=[{"role": "user", "content": "x"}])
    out["rate_limited"] = None
except openai.RateLimitError as e:
    out["rate_limited"] = {
        "status": e.status_code,
        "retry_after": e.response.headers.get("retry-after"),
        "message": e.message,
    }

try:
    an.messages.create(model="server-error", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    out["server_error"] = None
except anthropic.InternalServerError as e:
    out["server_error"] = {"status": e.status_code}

out["models"] = [m.id for m in oa.models.list().data]

print(json.dumps(out))
