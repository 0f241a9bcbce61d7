// The official OpenAI Node SDK, through its own calls, against a running `parlance serve`
// (PARLANCE_URL, started by run.sh with a fixture model): transcriptions in json, text and
// verbose_json with word timestamps, streaming, a translation, and an error surfacing as the
// SDK's typed APIError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.PARLANCE_URL + '/v1', apiKey: 'sdk-test-key' });
const clip = process.env.PARLANCE_CLIP;
const file = () => fs.createReadStream(clip);

test('transcription, json', async () => {
  const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', temperature: 0 });
  assert.equal(typeof r.text, 'string');
  assert.ok(r.text.length > 0);
});

test('transcription, text', async () => {
  const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', temperature: 0, response_format: 'text' });
  assert.equal(typeof r, 'string');
  assert.ok(r.length > 0);
});

test('transcription, verbose_json with word timestamps', async () => {
  const r = await client.audio.transcriptions.create({
    file: file(), model: 'whisper-1', temperature: 0, response_format: 'verbose_json',
    timestamp_granularities: ['word', 'segment'],
  });
  assert.equal(r.task, 'transcribe');
  assert.ok(Math.abs(r.duration - 11.0) < 0.01);
  assert.ok(r.segments.length > 0);
  assert.ok(Array.isArray(r.words) && r.words.length > 0);
  for (const w of r.words) {
    assert.equal(typeof w.word, 'string');
    assert.ok(w.end >= w.start && w.start >= 0 && w.end <= r.duration + 1e-6);
  }
});

test('transcription, streaming', async () => {
  const stream = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', temperature: 0, stream: true });
  let deltas = '';
  let done = null;
  for await (const event of stream) {
    if (event.type === 'transcript.text.delta') deltas += event.delta;
    if (event.type === 'transcript.text.done') done = event.text;
  }
  assert.notEqual(done, null);
  assert.equal(done, deltas.trimStart());
});

test('translation', async () => {
  const r = await client.audio.translations.create({ file: file(), model: 'whisper-1', temperature: 0 });
  assert.equal(typeof r.text, 'string');
});

test('an invalid request is a typed APIError with status 400', async () => {
  await assert.rejects(
    client.audio.transcriptions.create({ file: file(), model: 'whisper-1', response_format: 'srt', timestamp_granularities: ['word'] }),
    (e) => e instanceof OpenAI.APIError && e.status === 400 && e.param === 'timestamp_granularities[]',
  );
});

// Chat completions on the tiny random Qwen3 (its text is noise; the shapes and the controls are
// what is checked).
const chat = (extra) => ({
  model: 'qwen3-tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }],
  max_tokens: 8, temperature: 0, ...extra,
});

test('chat completion, non-streaming, with usage and logprobs', async () => {
  const r = await client.chat.completions.create(chat({ logprobs: true, top_logprobs: 3, ignore_eos: true }));
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'qwen3-tiny');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
  assert.equal(r.choices[0].logprobs.content.length, 8);
  for (const t of r.choices[0].logprobs.content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.logprob - 1e-6);
  }
});

test('chat completion, streaming equals non-streaming', async () => {
  const whole = await client.chat.completions.create(chat({ ignore_eos: true }));
  const stream = await client.chat.completions.create(chat({ ignore_eos: true, stream: true, stream_options: { include_usage: true } }));
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 8);
});

test('chat completion, n choices and seed reproducibility', async () => {
  const req = chat({ n: 3, temperature: 1, seed: 42, ignore_eos: true });
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  assert.equal(new Set(a.choices.map((c) => c.message.content)).size, 3);
});

test('chat completion, a stop string is never emitted', async () => {
  const whole = (await client.chat.completions.create(chat({ ignore_eos: true, max_tokens: 12 }))).choices[0].message.content;
  const chars = Array.from(whole);
  const stop = chars.slice(4, 6).join('');
  const r = await client.chat.completions.create(chat({ ignore_eos: true, max_tokens: 12, stop: [stop] }));
  assert.equal(r.choices[0].message.content, whole.slice(0, whole.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('chat completion, tools are accepted and a non-JSON call is not invented', async () => {
  const r = await client.chat.completions.create(chat({
    ignore_eos: true, max_tokens: 4,
    tools: [{ type: 'function', function: { name: 'get_time', description: 'The time', parameters: { type: 'object', properties: {} } } }],
    tool_choice: { type: 'function', function: { name: 'get_time' } },
  }));
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.ok(r.choices[0].message.content.startsWith('<tool_call>'));
});

test('chat completion, response_format json_schema: parse() gives an object of the schema', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['mood', 'level'],
    properties: { mood: { type: 'string', enum: ['calm', 'busy'] }, level: { type: 'integer' } },
  };
  const r = await client.chat.completions.parse(chat({
    max_tokens: 120, reasoning_effort: 'none', temperature: 0.7, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'mood', strict: true, schema } },
  }));
  const parsed = r.choices[0].message.parsed;
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(['calm', 'busy'].includes(parsed.mood), JSON.stringify(parsed));
  assert.ok(Number.isInteger(parsed.level));
  assert.deepEqual(Object.keys(parsed).sort(), ['level', 'mood']);
  await assert.rejects(client.chat.completions.create(chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'frob' } } } })),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.json_schema.schema');
});

test('chat completion errors are typed APIErrors naming the field', async () => {
  await assert.rejects(client.chat.completions.create(chat({ temperature: 5 })),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  await assert.rejects(client.chat.completions.create(chat({ model: 'nope' })),
    (e) => e instanceof OpenAI.NotFoundError && e.param === 'model');
});

test('completions (legacy text), non-streaming and streaming', async () => {
  const r = await client.completions.create({ model: 'qwen3-tiny', prompt: 'The quick brown fox', max_tokens: 6, temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 6);
  const stream = await client.completions.create({ model: 'qwen3-tiny', prompt: 'The quick brown fox', max_tokens: 6, temperature: 0, ignore_eos: true, stream: true });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, r.choices[0].text);
});

test('responses: create, continue, stream, retrieve, delete', async () => {
  const first = await client.responses.create({ model: 'qwen3-tiny', instructions: 'Be brief.', input: 'Hello!', max_output_tokens: 6, temperature: 0 });
  assert.equal(first.object, 'response');
  assert.equal(typeof first.output_text, 'string');
  const next = await client.responses.create({ model: 'qwen3-tiny', previous_response_id: first.id, input: 'And then?', max_output_tokens: 4, temperature: 0 });
  assert.ok(next.usage.input_tokens > first.usage.input_tokens);
  const stream = await client.responses.create({ model: 'qwen3-tiny', instructions: 'Be brief.', input: 'Hello!', max_output_tokens: 6, temperature: 0, stream: true });
  let text = '';
  let last = null;
  for await (const e of stream) {
    if (e.type === 'response.output_text.delta') text += e.delta;
    last = e;
  }
  assert.equal(text, first.output_text);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type));
  const got = await client.responses.retrieve(first.id);
  assert.equal(got.id, first.id);
  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e instanceof OpenAI.NotFoundError);
});
