// Load generator for OpenAI-compatible chat servers (parlance serve --chat-model, llama-server):
// C concurrent clients each send R chat completions of a fixed length (ignore_eos, greedy), and
// the run reports generated tokens/s over the wall time and TTFT percentiles (streamed: the time
// to the first chunk with content). --prefix N: instead, the time to the first token of a
// request whose first N prompt tokens were sent before (a prefix-cache hit) next to a cold one.
// Usage: node bench/chat_bench.mjs --url URL --model ID [--concurrency 1,8,32] [--requests 2]
//        [--max-tokens 64] [--prefix 2000 --reps 3]
import http from 'node:http';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => {
  if (v.startsWith('--')) a.push([v.slice(2), all[i + 1]]);
  return a;
}, []));
const url = args.url, model = args.model;
const maxTokens = Number(args['max-tokens'] ?? 64);
const requests = Number(args.requests ?? 2);

// One streamed chat completion on a fresh connection (no keep-alive: a server closing an idle
// pooled connection must not fail a request).
function chat(messages, max) {
  const body = JSON.stringify({ model, messages, max_tokens: max, temperature: 0, ignore_eos: true, stream: true,
                                stream_options: { include_usage: true } });
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url + '/v1/chat/completions', {
      method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Connection: 'close' },
    }, (res) => {
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${text}`)));
        return;
      }
      let buf = '', ttft = null, tokens = 0, chunks = 0;
      res.setEncoding('utf8');
      res.on('data', (d) => {
        buf += d;
        let at;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, at);
          buf = buf.slice(at + 2);
          if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
          const j = JSON.parse(ev.slice(6));
          if (j.usage && j.usage.completion_tokens) tokens = j.usage.completion_tokens;
          for (const c of j.choices ?? []) {
            if ((c.delta?.content ?? '') !== '' || (c.delta?.reasoning_content ?? '') !== '') {
              chunks++;
              if (ttft === null) ttft = performance.now() - t0;
            }
          }
        }
      });
      res.on('end', () => resolve({ ttft: ttft ?? performance.now() - t0, tokens: tokens || chunks, ms: performance.now() - t0 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
// A distinct ~40-token question per request: no prefix is shared beyond the template's header.
const question = (k) => [{ role: 'user', content: `Question ${k}: list ${k % 7 + 3} facts about the number ${k * 7919 % 1000} and explain each of them briefly in plain words.` }];

if (args.prefix) {
  const n = Number(args.prefix), reps = Number(args.reps ?? 3);
  const words = [];
  // Words of one token each (with their leading space): ~n prompt tokens.
  for (let i = 0; words.length < n; i++) words.push(['alpha', 'beta', 'gamma', 'delta', 'omega', 'river', 'stone'][i % 7]);
  const out = { prefix_words: n, cold_ms: [], warm_ms: [] };
  for (let r = 0; r < reps; r++) {
    const system = `Session ${r} ${Date.now()}. ` + words.join(' ');  // new per rep: the first is cold
    out.cold_ms.push((await chat([{ role: 'system', content: system }, { role: 'user', content: 'First question?' }], 1)).ttft);
    out.warm_ms.push((await chat([{ role: 'system', content: system }, { role: 'user', content: 'Second question?' }], 1)).ttft);
  }
  console.log(JSON.stringify(out));
} else {
  const results = [];
  for (const c of String(args.concurrency ?? '1,8,32').split(',').map(Number)) {
    await chat(question(999), 4);  // warm-up
    const t0 = performance.now();
    const all = await Promise.all(Array.from({ length: c }, async (_, i) => {
      const mine = [];
      for (let k = 0; k < requests; k++) mine.push(await chat(question(c * 1000 + i * requests + k), maxTokens));
      return mine;
    }));
    const wall = (performance.now() - t0) / 1000;
    const flat = all.flat();
    const tokens = flat.reduce((s, x) => s + x.tokens, 0);
    results.push({ concurrency: c, requests: flat.length, tokens, wall_s: wall, tokens_per_s: tokens / wall,
                   ttft_p50_ms: pct(flat.map((x) => x.ttft), 0.5), ttft_p90_ms: pct(flat.map((x) => x.ttft), 0.9) });
  }
  console.log(JSON.stringify(results));
}
