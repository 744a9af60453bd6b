"""The official `openai` Python SDK on the Responses API, driven by hand:
one function-tool round trip with `responses.create` or `responses.stream`.
Usage: openai_responses.py BASE_URL KEY (create|stream). Prints the final
`output_text`."""

import json
import sys

from openai import OpenAI

base, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
TOOLS = [
    {
        "type": "function",
        "name": "secret",
        "description": "Returns the secret form of a word.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]
inputs = [{"role": "user", "content": "What is the secret form of the word ocelot? Use the secret tool."}]


def secret(word):
    return f"{word.upper()}-{len(word)}"


def turn():
    """One model turn: the final `response`."""
    if mode == "create":
        return client.responses.create(model="gpt-4.1-mini", input=inputs, tools=TOOLS)
    streamed = ""
    with client.responses.stream(model="gpt-4.1-mini", input=inputs, tools=TOOLS) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                streamed += event.delta
        response = stream.get_final_response()
    # What streamed is what the final response says.
    assert streamed == response.output_text, (streamed, response.output_text)
    return response


response = turn()
calls = [item for item in response.output if item.type == "function_call"]
assert calls, f"the model asked for no tool: {response.output_text!r}"
inputs += [item.model_dump(exclude_none=True) for item in response.output]
for call in calls:
    inputs.append(
        {"type": "function_call_output", "call_id": call.call_id, "output": secret(**json.loads(call.arguments))}
    )
print(turn().output_text)
