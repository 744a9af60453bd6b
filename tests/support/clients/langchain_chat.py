"""LangChain's ChatOpenAI or ChatAnthropic with a bound tool, driven by
hand: one tool round trip. Usage: langchain_chat.py BASE_URL KEY
(openai|anthropic)."""

import sys

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

base, key, which = sys.argv[1], sys.argv[2], sys.argv[3]


@tool
def secret(word: str) -> str:
    """Returns the secret form of a word."""
    return f"{word.upper()}-{len(word)}"


if which == "openai":
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="gpt-4.1-mini", base_url=base + "/v1", api_key=key, max_retries=0)
else:
    from langchain_anthropic import ChatAnthropic

    chat = ChatAnthropic(model="claude-sonnet-4-5", base_url=base, api_key=key, max_retries=0)
model = chat.bind_tools([secret])
messages = [HumanMessage("What is the secret form of the word ocelot? Use the secret tool.")]
reply = model.invoke(messages)
assert reply.tool_calls, f"the model asked for no tool: {reply!r}"
messages.append(reply)
for call in reply.tool_calls:
    messages.append(secret.invoke(call))
reply = model.invoke(messages)
content = reply.content
if not isinstance(content, str):
    content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
print(content)
