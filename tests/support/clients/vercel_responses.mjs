// The Vercel AI SDK on the OpenAI Responses wire: `openai('gpt-4.1-mini')`
// (the provider's default model, which speaks `POST /v1/responses`) with
// one `secret` tool, driven by `generateText` or by `streamText` with its
// whole stream consumed. Prints the final text; exits non-zero when any
// request went elsewhere than `POST BASE/v1/responses`, when the stream
// holds an `error` (or `tool-error`) part, or when the final text is empty.
// Usage: node vercel_responses.mjs BASE_URL KEY (generate|stream).
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const [base, key, mode] = process.argv.slice(2);
if (!['generate', 'stream'].includes(mode)) {
  console.error(`usage: node vercel_responses.mjs BASE_URL KEY (generate|stream), not ${mode}`);
  process.exit(2);
}

// Every request the provider makes, as `METHOD URL`.
const sent = [];
const fetchSeen = async (input, init) => {
  const url = typeof input === 'string' ? input : input.url ?? String(input);
  sent.push(`${init?.method ?? 'GET'} ${url}`);
  return fetch(input, init);
};

const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: key, fetch: fetchSeen });
const options = {
  model: openai('gpt-4.1-mini'),
  maxRetries: 0,
  tools: {
    secret: tool({
      description: 'Returns the secret form of a word.',
      inputSchema: z.object({ word: z.string() }),
      execute: async ({ word }) => `${word.toUpperCase()}-${word.length}`,
    }),
  },
  stopWhen: stepCountIs(2),
  prompt: 'What is the secret form of the word ocelot? Use the secret tool.',
};

const failures = [];
let text;
if (mode === 'generate') {
  const result = await generateText(options);
  text = result.text;
} else {
  // Errors that do not stop the stream arrive as parts; `onError` keeps
  // the SDK from also logging them on its own.
  const result = streamText({ ...options, onError: () => {} });
  const kinds = [];
  for await (const part of result.stream) {
    kinds.push(part.type);
    if (part.type === 'error' || part.type === 'tool-error') {
      failures.push(`${part.type} part: ${describe(part.error)}`);
    }
  }
  console.error(`stream parts: ${kinds.join(' ')}`);
  try {
    text = await result.text;
  } catch (error) {
    failures.push(`the text: ${describe(error)}`);
  }
}

const elsewhere = sent.filter((line) => line !== `POST ${base}/v1/responses`);
console.error(`requests: ${sent.join(', ')}`);
if (sent.length === 0 || elsewhere.length > 0) {
  failures.push(`not every request was POST ${base}/v1/responses: ${sent.join(', ')}`);
}
if (!text) {
  failures.push('the final text is empty');
}
console.log(text ?? '');
if (failures.length > 0) {
  console.error(failures.join('\n'));
  process.exit(1);
}

function describe(error) {
  if (error instanceof Error) {
    const cause = error.cause ? ` (cause: ${describe(error.cause)})` : '';
    const body = error.responseBody ? ` body: ${error.responseBody}` : '';
    return `${error.name}: ${error.message}${body}${cause}`;
  }
  try {
    return JSON.stringify(error);
  } catch {
    return String(error);
  }
}
