// The web page (see web_page.h). Plain HTML and JavaScript, no build step, no external assets.
#include "server/web_page.h"

namespace parlance::server {

const std::string& web_page_html() {
    static const std::string html = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>parlance</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem} #text{white-space:pre-wrap;background:#f6f6f6;padding:1rem;border-radius:6px;min-height:3rem}
table{border-collapse:collapse;width:100%;margin-top:1rem} td{border-top:1px solid #ddd;padding:.3rem .5rem;vertical-align:top}
td.t{white-space:nowrap;color:#666;font-variant-numeric:tabular-nums} #status{color:#666}
</style></head><body>
<h1>parlance</h1>
<p>Choose an audio file (wav, mp3, m4a, flac, ogg, webm, ...) to transcribe it on this server.</p>
<form id="form"><input type="file" id="file" accept="audio/*,video/*" required>
<select id="task"><option value="transcriptions">transcribe</option><option value="translations">translate to English</option></select>
<input type="text" id="language" placeholder="language (auto)" size="12">
<input type="password" id="key" placeholder="API key (if the server has one)" size="24" autocomplete="off">
<button type="submit">Transcribe</button></form>
<p id="status"></p><div id="text"></div><table id="segments"></table>
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
</script></body></html>
)HTML";
    return html;
}

}  // namespace parlance::server
