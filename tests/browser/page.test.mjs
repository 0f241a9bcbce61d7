// The web page's microphone, end to end in headless Chromium: a fake capture device plays
// PARLANCE_CLIP (the spoken clips PARLANCE_CLIP_PARTS with pauses); the page's AudioWorklet turns it into 24 kHz PCM16
// and streams it to /v1/realtime with server VAD. Checks what a user sees: the page listens, the
// grey tentative text appears while speech goes on, each item's black (committed) text only ever
// grows — never revised, never repeated — and ends as the completed transcript, and the items
// together say what the file endpoint says of the clips.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';

const url = process.env.PARLANCE_URL;
const clip = process.env.PARLANCE_CLIP;
const parts = process.env.PARLANCE_CLIP_PARTS.split(':');

const words = (s) => s.toLowerCase().replace(/[^\p{L}\p{N}\s']/gu, ' ').split(/\s+/).filter(Boolean);

// Words of `a` matched in order in `b` (longest common subsequence), over the longer length.
function similarity(a, b) {
  const d = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i][j] = a[i - 1] === b[j - 1] ? d[i - 1][j - 1] + 1 : Math.max(d[i - 1][j], d[i][j - 1]);
  return d[a.length][b.length] / Math.max(a.length, b.length, 1);
}

async function fileTranscript(path) {
  const body = new FormData();
  body.append('file', new Blob([fs.readFileSync(path)], { type: 'audio/wav' }), 'clip.wav');
  body.append('model', 'whisper-1');
  const r = await fetch(url + '/v1/audio/transcriptions', { method: 'POST', body });
  assert.equal(r.status, 200);
  return (await r.json()).text;
}

test('the microphone button streams to /v1/realtime and the page shows the committed transcript', async () => {
  // What the file endpoint says of each spoken clip (the items the pauses make).
  const offline = (await Promise.all(parts.map(fileTranscript))).join(' ');
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${clip}%noloop`],
  });
  try {
    const page = await browser.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(url + '/');
    // Every text each item's spans show, in order, as the page changes.
    await page.evaluate(() => {
      window.seen = [];
      new MutationObserver(() => {
        for (const p of document.querySelectorAll('#live p'))
          window.seen.push({ item: p.dataset.item, committed: p.children[0].textContent,
            tentative: p.children[1].textContent, done: p.classList.contains('done') });
      }).observe(document.getElementById('live'), { subtree: true, childList: true, characterData: true });
    });
    await page.click('#mic');
    await page.waitForFunction(() => document.getElementById('live-status').textContent === 'listening',
      null, { timeout: 20000 });
    await page.evaluate(() => { window.listeningSince = performance.now(); });
    const clipSeconds = (fs.statSync(clip).size - 44) / 2 / 48000;
    // Until the recording has played and every item the server opened has its transcript.
    await page.waitForFunction((ms) => {
      const l = window.parlanceLive;
      return performance.now() - window.listeningSince > ms && l.items.size > 0 && !l.speaking &&
        [...l.items.values()].every((it) => it.done);
    }, clipSeconds * 1000, { timeout: 90000, polling: 200 }).catch(async (e) => {
      throw new Error(e.message + '\npage: ' + await page.textContent('#live') + ' / ' + await page.textContent('#live-status'));
    });
    const items = await page.$$eval('#live p', (ps) => ps.map((p) => ({ text: p.textContent, done: p.classList.contains('done') })));
    const seen = await page.evaluate(() => window.seen);
    assert.deepEqual(problems, []);

    // Committed text only grows, and the done item shows exactly it, with no grey left.
    const last = new Map();
    for (const s of seen) {
      const before = last.get(s.item) ?? '';
      assert.ok(s.committed.startsWith(before), `item ${s.item}: "${before}" became "${s.committed}"`);
      last.set(s.item, s.committed);
      if (s.done) assert.equal(s.tentative, '');
    }
    assert.ok(seen.some((s) => !s.done && s.tentative !== ''), 'no tentative text was ever shown');
    assert.ok(items.length >= 1 && items.every((it) => it.done));

    const live = items.map((it) => it.text).join(' ');
    const score = similarity(words(live), words(offline));
    console.log(`[page] ${items.length} items: "${live}" | file endpoint: "${offline}" | word agreement ${score.toFixed(2)}`);
    assert.ok(score >= 0.8, `the page shows "${live}", the file endpoint says "${offline}"`);
  } finally {
    await browser.close();
  }
});
