// The official Anthropic Node SDK, through its own calls, against a running `parlance serve`
// (PARLANCE_URL, started by run.sh with the tiny random Qwen3 as the chat model): messages,
// streaming with the SDK's event accumulator, count_tokens, stop sequences, tools, and errors as
// the SDK's typed APIError classes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({ baseURL: process.env.PARLANCE_URL, apiKey: 'sdk-test-key' });
const req = (extra) => ({
  model: 'qwen3-tiny', max_tokens: 8, temperature: 0, system: 'Be brief.',
  messages: [{ role: 'user', content: 'Hello!' }], ...extra,
});

test('messages.create', async () => {
  const m = await client.messages.create(req());
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.ok(m.content.length >= 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(['max_tokens', 'end_turn'].includes(m.stop_reason));
  assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= 8);
  const count = await client.messages.countTokens({ model: 'qwen3-tiny', system: 'Be brief.', messages: req().messages });
  assert.equal(count.input_tokens, m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
});

test('messages.stream accumulates to the same message', async () => {
  const whole = await client.messages.create(req());
  const stream = client.messages.stream(req());
  const names = [];
  stream.on('streamEvent', (e) => names.push(e.type));
  const final = await stream.finalMessage();
  assert.equal(names[0], 'message_start');
  assert.equal(names[names.length - 1], 'message_stop');
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
});

test('stop sequences end the message with stop_sequence', async () => {
  const whole = (await client.messages.create(req({ max_tokens: 12 }))).content[0].text;
  const chars = Array.from(whole);
  if (chars.length < 6) return;  // the random model ended early: nothing to cut
  const stop = chars.slice(3, 5).join('');
  const m = await client.messages.create(req({ max_tokens: 12, stop_sequences: [stop] }));
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0].text, whole.slice(0, whole.indexOf(stop)));
});

test('tools and a tool result in the history are accepted', async () => {
  const m = await client.messages.create(req({
    tools: [{ name: 'get_time', description: 'The time', input_schema: { type: 'object', properties: {} } }],
    messages: [
      { role: 'user', content: 'What time is it?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_time', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '12:00' }] },
    ],
  }));
  assert.equal(m.type, 'message');
});

test('errors are typed', async () => {
  await assert.rejects(client.messages.create(req({ temperature: 3 })),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error');
  await assert.rejects(client.messages.create(req({ model: 'claude-nope' })),
    (e) => e instanceof Anthropic.NotFoundError);
});
