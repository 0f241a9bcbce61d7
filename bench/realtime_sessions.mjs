// Concurrent live sessions against one `parlance serve`: N WebSocket clients stream the same
// 16 kHz mono WAV at real time (100 ms appends, server_vad), and the table reports, over all
// items of all sessions: end of speech (speech_stopped) -> completed p50/p95, first delta after
// the item's speech start p50/p95, and how far the last `completed` trails the end of the audio.
//
//   node --experimental-websocket bench/realtime_sessions.mjs [--uploads U] PORT FILE.wav N [N...]
//
// --uploads U: meanwhile U clients post FILE.wav to /v1/audio/transcriptions one after another
// (json, temperature 0), so the sessions compete with file requests; the table then also gives
// the uploads completed while the sessions ran.
//
// Node 20 needs --experimental-websocket (Node 22 has WebSocket built in). No npm packages.
import fs from 'fs';

const args = process.argv.slice(2);
let uploads = 0;
if (args[0] === '--uploads') { uploads = Number(args[1]); args.splice(0, 2); }
const [port, file, ...counts] = args;
const wav = fs.readFileSync(file);
const data = wav.indexOf('data');
const pcm = wav.subarray(data + 8);
const chunk = 3200;  // 100 ms of 16-bit 16 kHz
const pct = (v, p) => { if (!v.length) return NaN; const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.round(p * (s.length - 1)))]; };

function session() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/realtime?intent=transcription`);
    const r = {eos: [], first: [], items: 0, trail: 0};
    const stopped = new Map(), startMs = new Map(), gotDelta = new Set();
    let t0 = 0, open = 0, audioDone = false, lastDone = 0;
    ws.onerror = (e) => reject(e);
    ws.onmessage = (m) => {
      const e = JSON.parse(m.data), now = performance.now();
      if (e.type === 'input_audio_buffer.speech_started') { open++; startMs.set(e.item_id, e.audio_start_ms); }
      if (e.type === 'input_audio_buffer.speech_stopped') stopped.set(e.item_id, now);
      if (e.type === 'conversation.item.input_audio_transcription.delta' && !gotDelta.has(e.item_id)) {
        gotDelta.add(e.item_id);
        // wall time now vs the wall time the item's first audio was sent
        r.first.push((now - t0) / 1000 - startMs.get(e.item_id) / 1000);
      }
      if (e.type === 'conversation.item.input_audio_transcription.completed') {
        r.items++; lastDone = now;
        if (stopped.has(e.item_id)) r.eos.push((now - stopped.get(e.item_id)) / 1000);
        if (audioDone && r.items >= open) { r.trail = (lastDone - t0) / 1000 - pcm.length / 32000; ws.close(); resolve(r); }
      }
      if (e.type === 'error') console.error(JSON.stringify(e));
    };
    ws.onopen = async () => {
      ws.send(JSON.stringify({type: 'session.update', session: {type: 'transcription', audio: {input: {
        format: {type: 'audio/pcm', rate: 16000}, transcription: {language: 'en'}, turn_detection: {type: 'server_vad'}}}}}));
      t0 = performance.now();
      for (let i = 0; i < pcm.length; i += chunk) {
        ws.send(JSON.stringify({type: 'input_audio_buffer.append', audio: pcm.subarray(i, i + chunk).toString('base64')}));
        const due = t0 + ((i + chunk) / 32000) * 1000;
        await new Promise(res => setTimeout(res, Math.max(0, due - performance.now())));
      }
      for (let i = 0; i < 10; i++) ws.send(JSON.stringify({type: 'input_audio_buffer.append', audio: Buffer.alloc(chunk).toString('base64')}));
      audioDone = true;
      setTimeout(() => { ws.close(); resolve(r); }, 60000);
    };
  });
}

// One upload client: posts the file again as soon as the last answer came, until told to stop.
async function uploader(state) {
  while (!state.stop) {
    const form = new FormData();
    form.append('file', new Blob([wav], {type: 'audio/wav'}), 'audio.wav');
    form.append('model', 'whisper-1');
    form.append('temperature', '0');
    const res = await fetch(`http://127.0.0.1:${port}/v1/audio/transcriptions`, {method: 'POST', body: form});
    await res.text();
    if (!res.ok) { console.error(`upload: HTTP ${res.status}`); break; }
    if (!state.stop) state.done++;
  }
}

console.log(`| sessions | uploads | items | end of speech -> completed p50 / p95 | first delta p50 / p95 | last completed after the audio ends | uploads done |`);
console.log('|---|---|---|---|---|---|---|');
for (const n of counts.map(Number)) {
  const state = {stop: false, done: 0};
  const clients = Array.from({length: uploads}, () => uploader(state));
  const rs = await Promise.all(Array.from({length: n}, () => session()));
  state.stop = true;
  await Promise.all(clients);
  const eos = rs.flatMap(r => r.eos), first = rs.flatMap(r => r.first);
  const trail = Math.max(...rs.map(r => r.trail));
  const f = (x) => x.toFixed(3) + ' s';
  console.log(`| ${n} | ${uploads} | ${rs.reduce((a, r) => a + r.items, 0)} | ${f(pct(eos, 0.5))} / ${f(pct(eos, 0.95))} | ${f(pct(first, 0.5))} / ${f(pct(first, 0.95))} | ${f(trail)} | ${state.done} |`);
}
