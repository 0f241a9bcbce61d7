#!/usr/bin/env python3
"""A load generator for `parlance serve`: N clients each posting the same audio file to
/v1/audio/transcriptions, one request after another, until R requests are done; prints one JSON
line: concurrency, requests, ok, errors (status counts), seconds, requests/s, latency p50/p95.

  load_gen.py --url http://127.0.0.1:PORT --file clip.wav --concurrency 64 --requests 128

--chat posts /v1/chat/completions instead: one user message of about --prompt-words words and
exactly --max-tokens generated tokens a request (min_tokens = max_tokens, as llama-batched-bench's
-ntg: a random-weight model's end of sequence comes at random); the line adds the generated tokens
(usage.completion_tokens) and their rate over the run.

  load_gen.py --url http://127.0.0.1:PORT --chat --max-tokens 40 --concurrency 64 --requests 128
Standard library only (the GPU machine has no network); each request on its own connection.
"""
import argparse
import http.client
import json
import os
import threading
import time
import urllib.parse


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--file", help="the audio file (transcriptions)")
    p.add_argument("--chat", action="store_true", help="chat completions instead of transcriptions")
    p.add_argument("--max-tokens", type=int, default=40, help="--chat: tokens generated a request")
    p.add_argument("--prompt-words", type=int, default=120, help="--chat: words in the user message")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--requests", type=int, default=0, help="default: 2 per client")
    p.add_argument("--model", default="whisper-1")
    p.add_argument("--timeout", type=float, default=600)
    a = p.parse_args()
    if not a.chat and not a.file:
        p.error("--file is required without --chat")
    u = urllib.parse.urlparse(a.url)
    total = a.requests or 2 * a.concurrency
    if a.chat:
        words = " ".join(["the quick brown fox jumps over the lazy dog"] * (a.prompt_words // 9 + 1)).split()
        path = "/v1/chat/completions"
        body = json.dumps({"model": a.model, "messages": [{"role": "user", "content": " ".join(words[:a.prompt_words])}],
                           "max_tokens": a.max_tokens, "min_tokens": a.max_tokens, "temperature": 0}).encode()
        headers = {"Content-Type": "application/json"}
    else:
        path = "/v1/audio/transcriptions"
        body, headers = transcription_body(a.file, a.model)
    lock = threading.Lock()
    state = {"next": 0, "lat": [], "codes": {}, "chars": 0, "tokens": 0}

    def client():
        while True:
            with lock:
                if state["next"] >= total:
                    return
                state["next"] += 1
            t0 = time.monotonic()
            try:
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=a.timeout)
                c.request("POST", path, body=body, headers=headers)
                r = c.getresponse()
                text = r.read()
                code = r.status
                c.close()
            except OSError as e:
                code, text = type(e).__name__, b""
            dt = time.monotonic() - t0
            tokens = 0
            if a.chat and code == 200:
                try:
                    tokens = json.loads(text)["usage"]["completion_tokens"]
                except (ValueError, KeyError, TypeError):
                    code = "bad_body"
            with lock:
                state["codes"][str(code)] = state["codes"].get(str(code), 0) + 1
                if code == 200:
                    state["lat"].append(dt)
                    state["chars"] += len(text)
                    state["tokens"] += tokens

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    lat = sorted(state["lat"])
    q = lambda f: round(lat[min(len(lat) - 1, int(f * len(lat)))], 4) if lat else None
    line = {"concurrency": a.concurrency, "requests": total, "ok": len(lat), "codes": state["codes"],
            "seconds": round(secs, 3), "req_per_s": round(len(lat) / secs, 2), "p50_s": q(0.5), "p95_s": q(0.95),
            "mean_response_bytes": round(state["chars"] / max(1, len(lat)))}
    if a.chat:
        line["generated_tokens"] = state["tokens"]
        line["generated_tokens_per_s"] = round(state["tokens"] / secs, 1)
    print(json.dumps(line))


def transcription_body(file, model):
    audio = open(file, "rb").read()
    boundary = "parlanceloadgen"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"temperature\"\r\n\r\n0\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{os.path.basename(file)}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + audio + f"\r\n--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


if __name__ == "__main__":
    main()
