// The web page (see web_page.h). Plain HTML and JavaScript, no build step, no external assets.
#include "server/web_page.h"

namespace parlance::server {

const std::string& web_page_html() {
    static const std::string html = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>parlance</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<style>
body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem} #text{white-space:pre-wrap;background:#f6f6f6;padding:1rem;border-radius:6px;min-height:3rem}
table{border-collapse:collapse;width:100%;margin-top:1rem} td{border-top:1px solid #ddd;padding:.3rem .5rem;vertical-align:top}
td.t{white-space:nowrap;color:#666;font-variant-numeric:tabular-nums} #status,#live-status{color:#666}
h2{font-size:1.1rem;margin-top:2rem} #live{background:#f6f6f6;padding:1rem;border-radius:6px;min-height:3rem}
#live p{margin:.2rem 0} #live .tentative{color:#999} #live p.failed{color:#a00}
</style></head><body>
<h1>parlance</h1>
<p>Choose an audio file (wav, mp3, m4a, flac, ogg, webm, ...) to transcribe it on this server.</p>
<form id="form"><input type="file" id="file" accept="audio/*,video/*" required>
<select id="task"><option value="transcriptions">transcribe</option><option value="translations">translate to English</option></select>
<input type="text" id="language" placeholder="language (auto)" size="12">
<input type="password" id="key" placeholder="API key (if the server has one)" size="24" autocomplete="off">
<button type="submit">Transcribe</button></form>
<p id="status"></p><div id="text"></div><table id="segments"></table>
<h2>Live</h2>
<p>Speak: the text turns black once the server has committed it; grey is its current guess.</p>
<button type="button" id="mic">Start microphone</button> <span id="live-status"></span>
<div id="live" aria-live="polite"></div>
<script>
const $ = id => document.getElementById(id);
const fmt = s => new Date(s * 1000).toISOString().substr(11, 11);
// The key lives in this tab's session storage and travels only in the Authorization header,
// never in a URL (which logs and histories keep).
$('key').value = sessionStorage.getItem('parlance_api_key') || '';
$('key').onchange = () => sessionStorage.setItem('parlance_api_key', $('key').value);
$('form').onsubmit = async e => {
  e.preventDefault();
  const f = $('file').files[0]; if (!f) return;
  const body = new FormData();
  body.append('file', f); body.append('model', 'whisper-1'); body.append('response_format', 'verbose_json');
  if ($('language').value && $('task').value === 'transcriptions') body.append('language', $('language').value);
  $('status').textContent = 'transcribing ' + f.name + ' ...'; $('text').textContent = ''; $('segments').innerHTML = '';
  const t0 = performance.now();
  const headers = {};
  if ($('key').value) headers['Authorization'] = 'Bearer ' + $('key').value;
  const r = await fetch('/v1/audio/' + $('task').value, {method: 'POST', body, headers});
  const j = await r.json();
  if (r.status === 401) { $('status').textContent = 'this server needs its API key: ' + j.error.message; $('key').focus(); return; }
  if (!r.ok) { $('status').textContent = 'error ' + r.status + ': ' + j.error.message; return; }
  $('status').textContent = `${j.duration.toFixed(1)} s of ${j.language} audio in ${((performance.now()-t0)/1000).toFixed(1)} s`;
  $('text').textContent = j.text;
  for (const s of j.segments) {
    const row = $('segments').insertRow();
    row.insertCell().textContent = fmt(s.start) + ' → ' + fmt(s.end); row.cells[0].className = 't';
    row.insertCell().textContent = s.text;
  }
};

// Live transcription: the microphone's audio, turned into 24 kHz PCM16 by an AudioWorklet, streams
// to /v1/realtime (server VAD). Each item shows its committed text (the deltas), then the rest of the
// server's latest hypothesis in grey (parlance's tentative event), then its completed transcript.
const WORKLET = `
class Pcm16 extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / 24000;  // input samples per output sample
    this.next = this.step; this.seen = 0; this.sum = 0; this.n = 0; this.last = 0;
    this.out = new Int16Array(2400); this.len = 0;  // 100 ms per message
  }
  emit(v) {
    this.out[this.len++] = Math.max(-32768, Math.min(32767, Math.round(v * 32768)));
    if (this.len === this.out.length) {
      this.port.postMessage(this.out, [this.out.buffer]);
      this.out = new Int16Array(2400); this.len = 0;
    }
  }
  process(inputs) {
    const x = inputs[0] && inputs[0][0];
    if (!x) return true;
    for (let i = 0; i < x.length; i++) {
      // Each output sample is the mean of the input samples in its interval (a box filter: enough
      // against aliasing at 44.1/48 kHz for speech); a slower input repeats samples.
      this.sum += x[i]; this.n++; this.seen++;
      while (this.seen >= this.next) {
        this.emit(this.n ? this.sum / this.n : this.last);
        if (this.n) this.last = this.sum / this.n;
        this.sum = 0; this.n = 0; this.next += this.step;
      }
    }
    return true;
  }
}
registerProcessor('pcm16', Pcm16);`;
const TENTATIVE = 'parlance.input_audio_transcription.tentative';
let live = null;
const liveStatus = t => { $('live-status').textContent = t; };
const base64 = a => {
  const u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength); let s = '';
  for (let i = 0; i < u.length; i += 0x8000) s += String.fromCharCode.apply(null, u.subarray(i, i + 0x8000));
  return btoa(s);
};
function liveItem(id) {
  let it = live.items.get(id);
  if (!it) {
    const p = document.createElement('p'); p.dataset.item = id;
    const c = document.createElement('span'), t = document.createElement('span'); t.className = 'tentative';
    p.append(c, t); $('live').append(p);
    it = {p, c, t, committed: '', tentative: '', done: false}; live.items.set(id, it);
  }
  return it;
}
function liveRender(it) { it.c.textContent = it.committed; it.t.textContent = it.tentative; }
async function liveAudio(l) {
  const constraints = {audio: {channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false}};
  l.stream = await navigator.mediaDevices.getUserMedia(constraints);
  // A 24 kHz context lets the browser resample the microphone well; where a context cannot take a
  // microphone of another rate, the worklet resamples from the device's rate.
  try {
    l.ctx = new AudioContext({sampleRate: 24000}); l.source = l.ctx.createMediaStreamSource(l.stream);
  } catch (e) {
    if (l.ctx) l.ctx.close();
    l.ctx = new AudioContext(); l.source = l.ctx.createMediaStreamSource(l.stream);
  }
  await l.ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([WORKLET], {type: 'application/javascript'})));
  l.node = new AudioWorkletNode(l.ctx, 'pcm16');
  l.node.port.onmessage = m => {
    if (l.ws.readyState === WebSocket.OPEN && !l.stopping)
      l.ws.send(JSON.stringify({type: 'input_audio_buffer.append', audio: base64(m.data)}));
  };
  const mute = l.ctx.createGain(); mute.gain.value = 0;  // keeps the graph pulled, plays nothing
  l.source.connect(l.node); l.node.connect(mute); mute.connect(l.ctx.destination);
  await l.ctx.resume();
}
function liveStart() {
  const key = $('key').value;
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/v1/realtime?intent=transcription';
  // Browsers cannot set headers on a WebSocket: the key goes as a subprotocol, never in the URL.
  const ws = new WebSocket(url, key ? ['realtime', 'openai-insecure-api-key.' + key] : ['realtime']);
  live = {ws, items: new Map(), speaking: false, stopping: false};
  window.parlanceLive = live;  // for tests and the curious
  const l = live;
  $('mic').textContent = 'Stop microphone'; $('live').textContent = ''; liveStatus('connecting ...');
  ws.onopen = () => {
    const transcription = {model: 'whisper-1'};
    if ($('language').value) transcription.language = $('language').value;
    ws.send(JSON.stringify({type: 'session.update', session: {type: 'transcription', include: [TENTATIVE],
      audio: {input: {format: {type: 'audio/pcm', rate: 24000}, transcription, turn_detection: {type: 'server_vad'}}}}}));
  };
  ws.onclose = e => {
    if (live === l) liveStop();
    liveStatus(e.code === 1000 || e.code === 1005 ? 'stopped' : 'closed: ' + (e.reason || e.code));
    l.closed = true;
  };
  ws.onmessage = async m => {
    const e = JSON.parse(m.data);
    if (e.type === 'session.updated') {
      try { await liveAudio(l); liveStatus('listening'); }
      catch (err) { liveStatus('no microphone: ' + err.message); liveStop(); }
    } else if (e.type === 'input_audio_buffer.speech_started') {
      l.speaking = true; liveItem(e.item_id);
    } else if (e.type === 'input_audio_buffer.speech_stopped' || e.type === 'input_audio_buffer.committed') {
      l.speaking = false;
    } else if (e.type === 'conversation.item.input_audio_transcription.delta') {
      const it = liveItem(e.item_id); it.committed += e.delta; it.tentative = ''; liveRender(it);
    } else if (e.type === TENTATIVE) {
      const it = liveItem(e.item_id); it.tentative = e.text; liveRender(it);
    } else if (e.type === 'conversation.item.input_audio_transcription.completed') {
      const it = liveItem(e.item_id); it.committed = e.transcript; it.tentative = ''; it.done = true;
      it.p.classList.add('done'); liveRender(it);
    } else if (e.type === 'conversation.item.input_audio_transcription.failed') {
      const it = liveItem(e.item_id); it.done = true; it.p.classList.add('failed'); it.t.textContent = ' (failed: ' + e.error.message + ')';
    } else if (e.type === 'error') {
      liveStatus('error: ' + e.error.message);
    }
    if (l.stopping && [...l.items.values()].every(it => it.done)) ws.close(1000);
  };
}
// Stops the microphone; the speech going on is committed and the socket closes once every item
// has its transcript.
function liveStop() {
  const l = live; if (!l) return;
  live = null; l.stopping = true; $('mic').textContent = 'Start microphone';
  if (l.node) l.node.disconnect();
  if (l.stream) l.stream.getTracks().forEach(t => t.stop());
  if (l.ctx) l.ctx.close();
  if (l.ws.readyState !== WebSocket.OPEN) return;
  if (l.speaking) l.ws.send(JSON.stringify({type: 'input_audio_buffer.commit'}));
  liveStatus('finishing ...');
  if ([...l.items.values()].every(it => it.done)) l.ws.close(1000);
  else setTimeout(() => l.ws.close(1000), 15000);
}
$('mic').onclick = () => live ? liveStop() : liveStart();
</script></body></html>
)HTML";
    return html;
}

}  // namespace parlance::server
