// The official OpenAI SDK's realtime client (openai/realtime/ws, which always connects with wss:)
// against `parlance serve --tls-cert ... --tls-key ...` (run.sh makes the certificate and hands
// it to Node through NODE_EXTRA_CA_CERTS): a v6 release, which opens the session with ?model=,
// and a v7 release, which opens it with ?intent=transcription. Each sends a transcription
// session update, the clip as 16 kHz pcm16 (our extension: the same samples the file endpoint
// decodes), a commit, and checks the events: session created and updated, the buffer committed,
// deltas that join to the completed transcript, which equals the file endpoint's text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI6 from 'openai-v6';
import { OpenAIRealtimeWS as Realtime6 } from 'openai-v6/realtime/ws';
import OpenAI7 from 'openai-v7';
import { OpenAIRealtimeWS as Realtime7 } from 'openai-v7/realtime/ws';

const baseURL = process.env.PARLANCE_URL + '/v1';
const clip = process.env.PARLANCE_CLIP;

// The PCM16 samples of a 16 kHz mono WAV file (its "data" chunk).
function pcm16(path) {
  const b = fs.readFileSync(path);
  for (let at = 12; at + 8 <= b.length;) {
    const id = b.toString('ascii', at, at + 4);
    const size = b.readUInt32LE(at + 4);
    if (id === 'data') return b.subarray(at + 8, at + 8 + size);
    at += 8 + size + (size & 1);
  }
  throw new Error('no data chunk in ' + path);
}

async function transcribeLive(rt) {
  const events = [];
  const done = new Promise((resolve, reject) => {
    rt.on('event', (e) => {
      events.push(e);
      if (e.type === 'conversation.item.input_audio_transcription.completed') resolve();
    });
    rt.on('error', (e) => reject(new Error('realtime error: ' + JSON.stringify(e.error ?? e.message))));
  });
  await new Promise((resolve, reject) => { rt.socket.once('open', resolve); rt.socket.once('error', reject); });
  rt.send({
    type: 'session.update',
    session: {
      type: 'transcription',
      audio: { input: { format: { type: 'audio/pcm', rate: 16000 }, transcription: { model: 'whisper-1', language: 'en' }, turn_detection: null } },
    },
  });
  const pcm = pcm16(clip);
  for (let at = 0; at < pcm.length; at += 32000) rt.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(at, at + 32000).toString('base64') });
  rt.send({ type: 'input_audio_buffer.commit' });
  await done;
  rt.close();
  return events;
}

async function fileText(client) {
  const r = await client.audio.transcriptions.create({ file: fs.createReadStream(clip), model: 'whisper-1', language: 'en', temperature: 0 });
  return r.text;
}

function check(events, expected) {
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'session.created');
  assert.ok(types.includes('session.updated'), types.join(' '));
  const committed = events.find((e) => e.type === 'input_audio_buffer.committed');
  assert.ok(committed, types.join(' '));
  const done = events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed');
  assert.equal(done.item_id, committed.item_id);
  const joined = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === done.item_id)
    .map((e) => e.delta).join('');
  assert.equal(joined, done.transcript);
  assert.ok(done.transcript.length > 0);
  assert.equal(done.transcript, expected);
}

test('realtime over wss: the v6 SDK (?model=)', async () => {
  const client = new OpenAI6({ baseURL, apiKey: 'sdk-test-key' });
  const rt = new Realtime6({ model: 'whisper-1' }, client);
  assert.equal(rt.url.protocol, 'wss:');
  assert.equal(rt.url.searchParams.get('model'), 'whisper-1');
  check(await transcribeLive(rt), await fileText(client));
});

test('realtime over wss: the v7 SDK (?intent=transcription)', async () => {
  const client = new OpenAI7({ baseURL, apiKey: 'sdk-test-key' });
  const rt = new Realtime7({ intent: 'transcription' }, client);
  assert.equal(new URL(rt.url).searchParams.get('intent'), 'transcription');
  check(await transcribeLive(rt), await fileText(client));
});
