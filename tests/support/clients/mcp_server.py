"""A tiny stdio MCP server with instructions and one tool, for Claude
Code's MCP round trip. Usage: mcp_server.py."""

from mcp.server.mcpserver import MCPServer

server = MCPServer(
    "chimera",
    instructions="Chimera fidelity instructions: the secret tool knows every secret word.",
)


@server.tool()
def secret(word: str) -> str:
    """Returns the secret form of a word."""
    return f"{word.upper()}-{len(word)}"


if __name__ == "__main__":
    server.run()
