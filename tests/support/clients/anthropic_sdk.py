"""The official `anthropic` Python SDK, driven by hand: one tool round trip
on the Messages API. Usage: anthropic_sdk.py BASE_URL KEY (plain|stream)."""

import sys

from anthropic import Anthropic

base, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
client = Anthropic(base_url=base, api_key=key, max_retries=0)
TOOLS = [
    {
        "name": "secret",
        "description": "Returns the secret form of a word.",
        "input_schema": {
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
        },
    }
]
messages = [{"role": "user", "content": "What is the secret form of the word ocelot? Use the secret tool."}]


def secret(word):
    return f"{word.upper()}-{len(word)}"


def turn():
    asked = dict(model="claude-sonnet-4-5", max_tokens=1024, tools=TOOLS, messages=messages)
    if mode != "stream":
        return client.messages.create(**asked)
    with client.messages.stream(**asked) as stream:
        return stream.get_final_message()


reply = turn()
calls = [block for block in reply.content if block.type == "tool_use"]
assert calls, f"the model asked for no tool: {reply.content!r}"
messages.append({"role": "assistant", "content": reply.content})
messages.append(
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": secret(**call.input)}
            for call in calls
        ],
    }
)
reply = turn()
print("".join(block.text for block in reply.content if block.type == "text"))
