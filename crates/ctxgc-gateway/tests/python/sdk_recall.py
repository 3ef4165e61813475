"""The official OpenAI and Anthropic SDKs reading streamed answers during which the model
called `ctxgc_recall`: the gateway answered the call and continued upstream, and the client
must see one ordinary stream.

Usage: sdk_recall.py GATEWAY_BASE_URL FILE CHAT_ID MESSAGES_ID RESPONSES_ID

FILE holds the long tool output of the conversation; CHAT_ID, MESSAGES_ID and RESPONSES_ID
are the receipt ids the fake provider's model asks `ctxgc_recall` for. Prints one JSON object with what each
call returned.
"""

import json
import sys

import anthropic
import openai

base, path, chat_id, messages_id, responses_id = sys.argv[1:6]
with open(path, encoding="utf-8") as f:
    file_text = f.read()

oa = openai.OpenAI(base_url=base + "/v1", api_key="sk-test-openai-3f9c", max_retries=0)
an = anthropic.Anthropic(base_url=base, api_key="sk-ant-test-77ab", max_retries=0)

chat_messages = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Look at src/lib.rs."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/lib.rs"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": file_text},
    # The agent has read the file whole; only then may it be folded.
    {"role": "assistant", "content": "I have read it."},
    {"role": "user", "content": "What does line 100 say?"},
]

out = {}

# Plain iteration over the chunks.
text, calls = "", 0
stream = oa.chat.completions.create(
    model="recall:" + chat_id,
    messages=chat_messages,
    stream=True,
    stream_options={"include_usage": True},
)
for chunk in stream:
    for choice in chunk.choices:
        text += choice.delta.content or ""
        calls += len(choice.delta.tool_calls or [])
out["chat_text"] = text
out["chat_tool_calls"] = calls

# The SDK's stream helper, which accumulates the chunks into one completion.
with oa.chat.completions.stream(model="recall:" + chat_id, messages=chat_messages) as s:
    final = s.get_final_completion()
out["chat_final"] = final.choices[0].message.content
out["chat_final_tool_calls"] = len(final.choices[0].message.tool_calls or [])

anthropic_messages = [
    {"role": "user", "content": "Look at src/lib.rs."},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "src/lib.rs"}}
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": file_text}]},
    {"role": "assistant", "content": "I have read it."},
    {"role": "user", "content": "What does line 100 say?"},
]

# The SDK's stream helper: it places each block by its index.
with an.messages.stream(
    model="recall:" + messages_id,
    max_tokens=64,
    system="You are a coding agent.",
    messages=anthropic_messages,
) as s:
    final = s.get_final_message()
out["messages_final"] = [[b.type, getattr(b, "text", None)] for b in final.content]
out["messages_stop"] = final.stop_reason

# Responses, streamed: the raw events as the SDK parses them.
responses_input = [
    {"type": "message", "role": "user", "content": "Look at src/lib.rs."},
    {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": "src/lib.rs"}'},
    {"type": "function_call_output", "call_id": "c1", "output": file_text},
    {"type": "message", "role": "assistant", "content": "I have read it."},
    {"type": "message", "role": "user", "content": "What does line 100 say?"},
]
text, kinds, sequence, final_texts = "", [], [], None
for event in oa.responses.create(model="recall:" + responses_id, input=responses_input, stream=True):
    kinds.append(event.type)
    sequence.append(event.sequence_number)
    if event.type == "response.output_text.delta":
        text += event.delta
    if event.type == "response.output_item.added":
        kinds.append("item:" + event.item.type)
    if event.type == "response.completed":
        final_texts = [
            part.text for item in event.response.output if item.type == "message" for part in item.content
        ]
out["responses_text"] = text
out["responses_kinds"] = kinds
out["responses_sequence"] = sequence
out["responses_final"] = final_texts

print(json.dumps(out))
