"""The OpenAI Agents SDK with its default model (no model named: the SDK's
default, on the Responses API): one agent run that calls a local function
tool, `Runner.run` or `Runner.run_streamed`.
Usage: agents_responses.py BASE_URL KEY (run|stream). Prints the final
output."""

import asyncio
import sys

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

base, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
set_tracing_disabled(True)
set_default_openai_client(AsyncOpenAI(base_url=base + "/v1", api_key=key, max_retries=0), use_for_tracing=False)


@function_tool
def secret(word: str) -> str:
    """Returns the secret form of a word."""
    return f"{word.upper()}-{len(word)}"


agent = Agent(name="Fidelity", instructions="Answer with the secret tool.", tools=[secret])
QUESTION = "What is the secret form of the word ocelot? Use the secret tool."


async def main():
    if mode == "run":
        result = await Runner.run(agent, QUESTION)
    else:
        result = Runner.run_streamed(agent, QUESTION)
        async for _ in result.stream_events():
            pass
    print(result.final_output)


asyncio.run(main())
