"""The OpenAI Agents SDK with a chat-completions model: one agent run that
calls a local function tool. Usage: openai_agents.py BASE_URL KEY."""

import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

base, key = sys.argv[1], sys.argv[2]
set_tracing_disabled(True)


@function_tool
def secret(word: str) -> str:
    """Returns the secret form of a word."""
    return f"{word.upper()}-{len(word)}"


model = OpenAIChatCompletionsModel(
    model="gpt-4.1-mini",
    openai_client=AsyncOpenAI(base_url=base + "/v1", api_key=key, max_retries=0),
)
agent = Agent(name="Fidelity", instructions="Answer with the secret tool.", tools=[secret], model=model)
result = Runner.run_sync(agent, "What is the secret form of the word ocelot? Use the secret tool.")
print(result.final_output)
