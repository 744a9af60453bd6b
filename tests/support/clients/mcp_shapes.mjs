// The official TypeScript MCP client (@modelcontextprotocol/sdk) against
// a server that carries a secret in every shape a model reads: it prints,
// as one JSON object, everything the client was given (results, errors,
// the instructions, progress, sampling and elicitation requests).
// Usage: node mcp_shapes.mjs '["CMD", "ARG", ...]'
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [command, ...args] = JSON.parse(process.argv[2]);
const seen = {};
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
const client = new Client(
  { name: 'shapes', version: '0' },
  { capabilities: { sampling: {}, elicitation: { form: {} } } },
);
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  seen.sampling = request.params;
  return { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'm' };
});
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  seen.elicitation = request.params;
  return { action: 'decline' };
});
await client.connect(transport);
seen.instructions = client.getInstructions();
seen.tools = (await client.listTools()).tools.map((tool) => tool.name);
const calls = ['text', 'embedded', 'link', 'structured', 'is_error', 'rpc_error', 'string_id',
  'progress', 'sample', 'elicit', 'garbage'];
for (const name of calls) {
  const progress = [];
  try {
    seen[name] = await client.callTool({ name, arguments: {} }, undefined, {
      onprogress: (update) => progress.push(update),
      timeout: 10000,
    });
  } catch (error) {
    seen[name] = { thrown: String((error && error.message) || error) };
  }
  // Progress is handled after the answer may be: looked at last.
  seen[`${name}_progress`] = progress;
}
seen.resource = await client.readResource({ uri: 'file:///notes' });
seen.prompt = await client.getPrompt({ name: 'p' });
// Requests the server sent are answered by now.
await new Promise((resolve) => setTimeout(resolve, 200));
for (const name of calls) {
  if (!seen[`${name}_progress`].length) delete seen[`${name}_progress`];
}
console.log(JSON.stringify(seen));
await client.close();
