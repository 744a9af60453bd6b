// The official TypeScript MCP client over streamable HTTP, able to
// sample: calls server-everything's trigger-sampling-request and prints,
// as one JSON line, whether its sampling handler was ever asked and what
// the call gave. Usage: node mcp_http_sampling.mjs URL
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url] = process.argv.slice(2);
const client = new Client({ name: 'sampling', version: '0' }, { capabilities: { sampling: {} } });
let sampled = false;
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  sampled = true;
  return { role: 'assistant', content: { type: 'text', text: 'sampled' }, model: 'm' };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
let result;
try {
  result = await client.callTool(
    { name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 5 } },
    undefined,
    { timeout: 15000 },
  );
} catch (error) {
  result = { thrown: String((error && error.message) || error) };
}
console.log(JSON.stringify({ sampled, result }));
process.exit(0);
