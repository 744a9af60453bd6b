"""The official Python MCP client at the newest protocol it speaks,
against the server at URL: prints, as one JSON object, the protocol
version agreed, the instructions, and what each call gave (an
elicitation it is asked for is recorded, then accepted).
Usage: mcp_modern_client.py URL"""

import asyncio
import json
import sys

from mcp import types
from mcp.client.client import Client


async def main():
    seen = {"elicitations": []}

    async def elicitation(context, params):
        seen["elicitations"].append(params.model_dump(mode="json"))
        return types.ElicitResult(action="accept", content={})

    async with Client(sys.argv[1], elicitation_callback=elicitation) as client:
        seen["protocol"] = client.protocol_version
        seen["instructions"] = getattr(client, "instructions", None)
        for name, arguments in [("notes", {}), ("echo", {"message": "hi"}), ("confirm", {})]:
            try:
                seen[name] = (await client.call_tool(name, arguments)).model_dump(mode="json")
            except Exception as error:  # what the client raised is what it was given
                seen[name] = {"thrown": str(error)}
    print(json.dumps(seen))


asyncio.run(main())
