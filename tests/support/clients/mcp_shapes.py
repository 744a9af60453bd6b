"""The official Python MCP client (mcp) against a server that carries a
secret in every shape a model reads: prints, as one JSON object,
everything the client was given. Usage: mcp_shapes.py '["CMD", "ARG", ...]'"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

CALLS = ["text", "embedded", "link", "structured", "is_error", "rpc_error", "string_id",
         "progress", "sample", "elicit", "garbage"]


async def main():
    command, *args = json.loads(sys.argv[1])
    seen = {}

    async def sampling(context, params):
        seen["sampling"] = params.model_dump(mode="json")
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text="ok"))

    async def elicitation(context, params):
        seen["elicitation"] = params.model_dump(mode="json")
        return types.ElicitResult(action="decline")

    server = StdioServerParameters(command=command, args=args)
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=10,
                                 sampling_callback=sampling,
                                 elicitation_callback=elicitation) as session:
            initialized = await session.initialize()
            seen["instructions"] = initialized.instructions
            seen["tools"] = [tool.name for tool in (await session.list_tools()).tools]
            for name in CALLS:
                progress = []

                async def on_progress(done, total, message, progress=progress):
                    progress.append({"progress": done, "total": total, "message": message})

                try:
                    result = await session.call_tool(name, {}, progress_callback=on_progress)
                    seen[name] = result.model_dump(mode="json")
                except Exception as error:  # what the client raised is what it was given
                    seen[name] = {"thrown": str(error)}
                if progress:
                    seen[f"{name}_progress"] = progress
            seen["resource"] = (await session.read_resource("file:///notes")).model_dump(mode="json")
            seen["prompt"] = (await session.get_prompt("p")).model_dump(mode="json")
            await asyncio.sleep(0.2)
    print(json.dumps(seen))


asyncio.run(main())
