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
