#!/usr/bin/env python3
"""Concurrent live sessions against one `parlance serve`, for machines without Node (the GPU
machine has Python and aiohttp; bench/realtime_sessions.mjs is the same measurement in Node).

N WebSocket clients each stream the same 16 kHz mono 16-bit WAV at real time (100 ms appends,
server_vad), started a little apart, then 1 s of silence. Over all items of all sessions it
reports end of speech (speech_stopped) -> completed p50/p95, the first delta after an item's
speech start p50/p95, how far the last `completed` trails the end of the audio, and the sessions
refused or ended by an error. One line of JSON per level.

  python3 bench/realtime_load.py --url http://127.0.0.1:PORT --file long.wav --sessions 64 128 256

Needs aiohttp (on the GPU machine's image; here `apt-get install python3-aiohttp`).
"""
import argparse
import asyncio
import base64
import json
import time
import wave

import aiohttp

CHUNK_S = 0.1


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, round(p * (len(s) - 1)))], 4)


async def session(http, url, pcm, start_delay, result):
    """One live session: streams `pcm` at real time and records each item's latencies."""
    await asyncio.sleep(start_delay)
    ws_url = url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
    stopped, started, got_delta = {}, {}, set()
    open_items = done_items = 0
    audio_done = asyncio.Event()
    chunk = int(16000 * CHUNK_S) * 2
    try:
        async with http.ws_connect(ws_url, max_msg_size=0, heartbeat=None) as ws:
            await ws.send_str(json.dumps({"type": "session.update", "session": {"type": "transcription", "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": 16000}, "transcription": {"language": "en"},
                          "turn_detection": {"type": "server_vad"}}}}}))
            t0 = time.monotonic()

            async def send():
                n = 0
                for i in range(0, len(pcm), chunk):
                    await ws.send_str(json.dumps({"type": "input_audio_buffer.append",
                                                  "audio": base64.b64encode(pcm[i:i + chunk]).decode()}))
                    n += 1
                    due = t0 + n * CHUNK_S
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                silence = base64.b64encode(bytes(chunk)).decode()
                for _ in range(10):
                    await ws.send_str(json.dumps({"type": "input_audio_buffer.append", "audio": silence}))
                audio_done.set()

            sender = asyncio.create_task(send())
            deadline = None
            while True:
                timeout = None if deadline is None else max(0.01, deadline - time.monotonic())
                try:
                    msg = await ws.receive(timeout=timeout)
                except asyncio.TimeoutError:
                    break
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                now = time.monotonic()
                e = json.loads(msg.data)
                kind = e.get("type")
                item = e.get("item_id")
                if kind == "input_audio_buffer.speech_started":
                    open_items += 1
                    started[item] = e.get("audio_start_ms", 0) / 1000.0
                elif kind == "input_audio_buffer.speech_stopped":
                    stopped[item] = now
                elif kind == "conversation.item.input_audio_transcription.delta" and item not in got_delta:
                    got_delta.add(item)
                    result["first"].append((now - t0) - started.get(item, 0.0))
                elif kind == "conversation.item.input_audio_transcription.completed":
                    done_items += 1
                    result["items"] += 1
                    if item in stopped:
                        result["eos"].append(now - stopped[item])
                    result["last"] = max(result["last"], (now - t0) - len(pcm) / 32000.0)
                elif kind == "error":
                    result["errors"] += 1
                if audio_done.is_set():
                    if deadline is None:
                        deadline = now + 60.0  # an item that never completes ends the session
                    if done_items >= open_items:
                        break
            sender.cancel()
            await ws.close()
    except aiohttp.WSServerHandshakeError as e:
        result["refused"] += 1 if e.status == 429 else 0
        result["failed"] += 0 if e.status == 429 else 1
    except (aiohttp.ClientError, ConnectionError):
        result["failed"] += 1


async def level(url, pcm, n, ramp_s):
    result = {"eos": [], "first": [], "items": 0, "last": 0.0, "errors": 0, "refused": 0, "failed": 0}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as http:
        await asyncio.gather(*(session(http, url, pcm, ramp_s * i / max(1, n), result) for i in range(n)))
    return {"sessions": n, "items": result["items"], "eos_p50_s": pct(result["eos"], 0.5),
            "eos_p95_s": pct(result["eos"], 0.95), "first_delta_p50_s": pct(result["first"], 0.5),
            "first_delta_p95_s": pct(result["first"], 0.95), "last_completed_after_audio_s": round(result["last"], 3),
            "refused": result["refused"], "failed": result["failed"], "error_events": result["errors"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8080")
    ap.add_argument("--file", required=True, help="16 kHz mono 16-bit WAV, streamed by every session")
    ap.add_argument("--sessions", type=int, nargs="+", required=True, help="concurrent sessions, one level each")
    ap.add_argument("--ramp", type=float, default=1.0, help="seconds over which a level's sessions start")
    a = ap.parse_args()
    with wave.open(a.file) as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit(f"{a.file}: not 16 kHz mono 16-bit")
        pcm = w.readframes(w.getnframes())
    for n in a.sessions:
        print(json.dumps(asyncio.run(level(a.url, pcm, n, a.ramp))), flush=True)


if __name__ == "__main__":
    main()
