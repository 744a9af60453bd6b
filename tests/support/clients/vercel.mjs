// The Vercel AI SDK: generateText with one tool, on openai.chat(...) or
// anthropic(...). Usage: node vercel.mjs BASE_URL KEY (openai|anthropic).
import { generateText, stepCountIs, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { z } from 'zod';

const [base, key, which] = process.argv.slice(2);
const model =
  which === 'openai'
    ? createOpenAI({ baseURL: `${base}/v1`, apiKey: key }).chat('gpt-4.1-mini')
    : createAnthropic({ baseURL: `${base}/v1`, apiKey: key })('claude-sonnet-4-5');
const result = await generateText({
  model,
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
});
console.log(result.text);
