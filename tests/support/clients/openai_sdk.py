"""The official `openai` Python SDK, driven by hand: one tool round trip on
chat completions. Usage: openai_sdk.py BASE_URL KEY (plain|stream)."""

import json
import sys

from openai import OpenAI

base, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
stream = mode == "stream"
client = OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "secret",
            "description": "Returns the secret form of a word.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string"}},
                "required": ["word"],
            },
        },
    }
]
messages = [{"role": "user", "content": "What is the secret form of the word ocelot? Use the secret tool."}]


def secret(word):
    return f"{word.upper()}-{len(word)}"


def turn():
    if not stream:
        reply = client.chat.completions.create(model="gpt-4.1-mini", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return message.content, calls
    text, calls = "", {}
    chunks = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            text += delta.content or ""
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = part.id or call["id"]
                if part.function:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
    return text, [(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())]


text, calls = turn()
assert calls, f"the model asked for no tool: {text!r}"
messages.append(
    {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for id, name, arguments in calls
        ],
    }
)
for id, name, arguments in calls:
    messages.append({"role": "tool", "tool_call_id": id, "content": secret(**json.loads(arguments))})
text, calls = turn()
print(text)
