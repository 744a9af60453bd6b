// The official TypeScript MCP client over streamable HTTP: lists the
// tools of the server at URL, calls echo with a secret and a tool the
// guard denies, prints what it was given as one JSON line, then prints
// `calling` and makes a long call (the test kills the server during it),
// and prints that call's outcome as a last JSON line.
// Usage: node mcp_http.mjs URL
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url] = process.argv.slice(2);
const client = new Client({ name: 'http', version: '0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const seen = {};
seen.instructions = client.getInstructions();
seen.tools = (await client.listTools()).tools.map((tool) => tool.name);
seen.echo = await client.callTool({ name: 'echo', arguments: { message: 'key sk-live-0123456789abcdef' } });
seen.denied = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
console.log(JSON.stringify(seen));
console.log('calling');
let outcome;
try {
  outcome = await client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 8, steps: 4 } },
    undefined,
    { timeout: 30000 },
  );
} catch (error) {
  outcome = { thrown: String((error && error.message) || error) };
}
console.log(JSON.stringify(outcome));
process.exit(0);
