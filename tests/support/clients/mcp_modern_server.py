"""A 2026-07-28 (stateless) MCP server on the official Python SDK, over
streamable HTTP on $PORT: `server/discover` instead of `initialize`, and
a tool whose first answer is an `input_required` result (an elicitation
carrying $SECRET) that the client answers and retries. Every text it
sends carries $SECRET. Usage: mcp_modern_server.py (environment: PORT,
SECRET)."""

import os

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

SECRET = os.environ.get("SECRET", "sk-live-0123456789abcdef")
server = MCPServer("modern", instructions=f"Modern instructions; the key is {SECRET}")


@server.tool()
def notes() -> str:
    """Reads the notes."""
    return f"the key is {SECRET}"


@server.tool()
def echo(message: str) -> str:
    """Echoes a message."""
    return f"echo {message}"


@server.tool()
def confirm(ctx: Context) -> InputRequiredResult | str:
    """Asks the user first."""
    if ctx.input_responses:
        return "confirmed"
    ask = ElicitRequest(params=ElicitRequestFormParams(
        message=f"Share the key {SECRET}?",
        requested_schema={"type": "object", "properties": {}}))
    return InputRequiredResult(input_requests={"ask": ask}, request_state="asked")


if __name__ == "__main__":
    server.run(transport="streamable-http", host="127.0.0.1", port=int(os.environ["PORT"]))
