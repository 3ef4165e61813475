"""Tenants through the official OpenAI and Anthropic SDKs: clients with different API keys
that open their conversations the same way, and one key holding two conversations that open
the same way, all interleaved; then recalls of a receipt id from its own tenant and from
another.

Usage: sdk_tenants.py GATEWAY_BASE_URL RECEIPT_ID FILE

RECEIPT_ID is the id a stub names in the conversation of the key `sk-alice-0001` (the long
read of FILE); prints one JSON object with what each call returned.
"""

import json
import sys

import anthropic
import openai

base, receipt_id, path = sys.argv[1:4]
with open(path, encoding="utf-8") as f:
    file_text = f.read()
SYSTEM = "You are a coding agent."
out = {}

# Four OpenAI keys, one conversation each, all opening with the same system prompt and "Hi".
clients = [
    openai.OpenAI(base_url=base + "/v1", api_key=f"sk-tenant-{n}", max_retries=0) for n in range(4)
]
histories = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}] for _ in clients]
answers = [[] for _ in clients]
for round_number in range(4):
    for n, (client, history) in enumerate(zip(clients, histories)):
        if round_number > 0:
            history.append({"role": "user", "content": f"Question {round_number} from tenant {n}?"})
        reply = client.chat.completions.create(model="fake-model", messages=history)
        text = reply.choices[0].message.content
        answers[n].append(text)
        history.append({"role": "assistant", "content": text})
out["openai_answers"] = answers

# Two Anthropic keys, the same opening.
an_clients = [anthropic.Anthropic(base_url=base, api_key=f"sk-ant-tenant-{n}", max_retries=0) for n in range(2)]
an_histories = [[{"role": "user", "content": "Hi"}] for _ in an_clients]
an_answers = [[] for _ in an_clients]
for round_number in range(3):
    for n, (client, history) in enumerate(zip(an_clients, an_histories)):
        if round_number > 0:
            history.append({"role": "user", "content": f"Question {round_number} from tenant {n}?"})
        reply = client.messages.create(model="fake-model", max_tokens=32, system=SYSTEM, messages=history)
        text = reply.content[0].text
        an_answers[n].append(text)
        history.append({"role": "assistant", "content": text})
out["anthropic_answers"] = an_answers

# One key, two conversations with the same opening, interleaved.
one = openai.OpenAI(base_url=base + "/v1", api_key="sk-one-key", max_retries=0)
pair = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}] for _ in range(2)]
pair_answers = [[], []]
for round_number in range(4):
    for n, history in enumerate(pair):
        if round_number > 0:
            history.append({"role": "user", "content": f"Conversation {n}, question {round_number}?"})
        reply = one.chat.completions.create(model="fake-model", messages=history)
        text = reply.choices[0].message.content
        pair_answers[n].append(text)
        history.append({"role": "assistant", "content": text})
out["pair_answers"] = pair_answers

# Recalls: the owner gets the original; another key opening the same way gets nothing of it.
read = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "src/lib.rs"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": file_text},
    {"role": "assistant", "content": "I have read it."},
    {"role": "user", "content": "What does line 100 say?"},
]
alice = openai.OpenAI(base_url=base + "/v1", api_key="sk-alice-0001", max_retries=0)
bob = openai.OpenAI(base_url=base + "/v1", api_key="sk-bob-0002", max_retries=0)
out["alice_recall"] = alice.chat.completions.create(model="recall:" + receipt_id, messages=read).choices[0].message.content
out["bob_recall"] = (
    bob.chat.completions.create(model="recall:" + receipt_id, messages=read[:2]).choices[0].message.content
)
an_alice = anthropic.Anthropic(base_url=base, api_key="sk-alice-0001", max_retries=0)
an_bob = anthropic.Anthropic(base_url=base, api_key="sk-bob-0002", max_retries=0)
out["anthropic_bob_recall"] = (
    an_bob.messages.create(
        model="recall:" + receipt_id, max_tokens=32, system=SYSTEM, messages=[{"role": "user", "content": "Hi"}]
    )
    .content[0]
    .text
)
del an_alice

print(json.dumps(out))
