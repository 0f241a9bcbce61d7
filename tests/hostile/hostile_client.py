#!/usr/bin/env python3
"""A hostile client against a running `parlance serve` (issue 50's campaign, replayed).

Every request here once took the server down or past a limit: schema bombs, 50,000-deep JSON on
every JSON route, a 100,000-value enum, concurrent WebSocket opens past --max-sessions, realtime
values that wrapped at 32 bits or were accepted with the wrong type, an unknown ?model=, a 30 MB
body on an Anthropic route, count_tokens past the context. Each must come back as a 4xx in its
route's error shape (Anthropic's on /v1/messages*) or, in a live session, as an error event after
which the session still works — while a watchdog samples the server's RSS, which must stay within
--rss-slack-mb of its idle level, and the server must still answer /health at the end.

Loopback only, standard library only, every socket with a timeout. Exit status 0 when all hold.

  hostile_client.py --port PORT --pid PID [--api-key KEY] [--max-sessions N] [--chat-model ID]
"""
import argparse
import base64
import http.client
import json
import os
import socket
import sys
import threading
import time

HOST = "127.0.0.1"
TIMEOUT = 60.0


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


class Watchdog(threading.Thread):
    """Samples the server's RSS every 20 ms; remembers the peak."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except (OSError, RuntimeError):
                return  # the process is gone: the final /health check reports it
            time.sleep(0.02)


class Client:
    def __init__(self, port, key):
        self.port, self.key = port, key
        self.failures, self.checks = [], 0

    def headers(self, anthropic=False):
        h = {"Content-Type": "application/json"}
        if self.key:
            h["x-api-key" if anthropic else "Authorization"] = self.key if anthropic else "Bearer " + self.key
        return h

    def post(self, path, body, anthropic=False):
        data = body if isinstance(body, bytes) else body.encode()
        c = http.client.HTTPConnection(HOST, self.port, timeout=TIMEOUT)
        try:
            c.request("POST", path, body=data, headers=self.headers(anthropic))
            r = c.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        except (ConnectionError, socket.timeout, http.client.HTTPException) as e:
            return 0, f"{type(e).__name__}: {e}"
        finally:
            c.close()

    def expect(self, name, ok, detail=""):
        self.checks += 1
        print(("ok    " if ok else "FAIL  ") + name + ("" if ok else f": {detail[:300]}"), flush=True)
        if not ok:
            self.failures.append(name)

    def expect_4xx(self, name, path, body, status=400, anthropic=False, code=None):
        got, text = self.post(path, body, anthropic)
        shape_ok = False
        try:
            j = json.loads(text)
            if anthropic:
                shape_ok = j.get("type") == "error" and "type" in j["error"] and "message" in j["error"]
            else:
                e = j["error"]
                shape_ok = all(k in e for k in ("message", "type", "param", "code"))
                if code is not None:
                    shape_ok = shape_ok and e["code"] == code
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        self.expect(name, got == status and shape_ok, f"status {got}, body {text}")
        return got, text


def deep(n):
    return "[" * n + "]" * n


def chat_body(model, extra):
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    body.update(extra)
    return json.dumps(body)


def schema_format(schema):
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}


# --- WebSocket (RFC 6455), enough for a client: handshake, masked text frames, reading frames.


def ws_open(port, path, key=None, timeout=TIMEOUT):
    s = socket.create_connection((HOST, port), timeout=timeout)
    req = (f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
    if key:
        req += f"Authorization: Bearer {key}\r\n"
    s.sendall((req + "\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    rest = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""
    return s, status, rest


def ws_send(s, text):
    data = text.encode()
    mask = os.urandom(4)
    n = len(data)
    head = bytes([0x81])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


class WsReader:
    def __init__(self, s, pending=b""):
        self.s, self.buf = s, pending

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def event(self):
        """The next text frame as JSON (None on a close frame)."""
        while True:
            b0, b1 = self._need(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._need(2), "big")
            elif n == 127:
                n = int.from_bytes(self._need(8), "big")
            payload = self._need(n)
            op = b0 & 0x0F
            if op == 0x8:
                return None
            if op == 0x1:
                return json.loads(payload)


def realtime_checks(c, port, key):
    """Bad messages in one live session: each an error event, the session usable after them."""
    s, status, rest = ws_open(port, "/v1/realtime?intent=transcription", key)
    c.expect("realtime opens", status == 101, f"status {status}")
    if status != 101:
        return
    r = WsReader(s, rest)
    created = r.event()
    c.expect("realtime session.created", created and created.get("type") == "session.created", str(created))
    td = lambda v: {"type": "session.update", "session": {"audio": {"input": {"turn_detection": v}}}}
    bad = [
        ("turn_detection \"yes\"", td("yes")),
        ("semantic_vad eagerness \"x\"", td({"type": "semantic_vad", "eagerness": "x"})),
        ("silence_duration_ms 2^32+700", td({"type": "server_vad", "silence_duration_ms": 2 ** 32 + 700})),
        ("silence_duration_ms 2^31", td({"type": "server_vad", "silence_duration_ms": 2 ** 31})),
        ("silence_duration_ms 10^18", td({"type": "server_vad", "silence_duration_ms": 10 ** 18})),
        ("language with a NUL", {"type": "session.update",
                                  "session": {"audio": {"input": {"transcription": {"language": "e\u0000n"}}}}}),
    ]
    for name, ev in bad:
        ws_send(s, json.dumps(ev))
        e = r.event()
        ok = e is not None and e.get("type") == "error"
        if ok and "NUL" in name:
            ok = "\\x00n" in e["error"]["message"]  # the message goes on past the NUL
        c.expect("realtime " + name + " -> error event", ok, str(e))
    ws_send(s, '{"type": "session.update", "session": ' + deep(50000) + "}")
    e = r.event()
    c.expect("realtime 50,000-deep event -> error event", e is not None and e.get("type") == "error"
             and e["error"].get("code") == "json_too_deep", str(e)[:300])
    ws_send(s, json.dumps(td({"type": "server_vad", "silence_duration_ms": 700})))
    e = r.event()
    c.expect("realtime session still usable (session.updated, 700 ms kept)",
             e is not None and e.get("type") == "session.updated"
             and e["session"]["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 700, str(e)[:300])
    ws_send(s, json.dumps({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(b"\0\0" * 2400).decode()}))
    s.close()
    # An unknown ?model= is refused before the upgrade, as session.update refuses it.
    s2, status, rest = ws_open(port, "/v1/realtime?intent=transcription&model=nonesuch", key)
    s2.close()
    c.expect("realtime ?model=nonesuch -> 404", status == 404, f"status {status}")


def session_race(c, port, key, limit, n=200):
    """n WebSocket opens at once: exactly `limit` upgraded, the rest 429."""
    barrier = threading.Barrier(n)
    results, sockets, lock = [], [], threading.Lock()

    def one():
        try:
            barrier.wait(timeout=TIMEOUT)
            s, status, _ = ws_open(port, "/v1/realtime?intent=transcription", key)
        except (OSError, threading.BrokenBarrierError) as e:
            status, s = 0, None
        with lock:
            results.append(status)
            if s:
                sockets.append(s)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    accepted = results.count(101)
    c.expect(f"{n} concurrent session opens -> exactly {limit} accepted (--max-sessions)",
             accepted == limit and results.count(429) == n - limit,
             f"101: {accepted}, 429: {results.count(429)}, other: {sorted(set(results))}")
    for s in sockets:
        s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--api-key", default="")
    p.add_argument("--max-sessions", type=int, default=64)
    p.add_argument("--chat-model", default="qwen3-tiny")
    p.add_argument("--rss-slack-mb", type=float, default=200)
    a = p.parse_args()

    c = Client(a.port, a.api_key)
    idle = rss_mb(a.pid)
    dog = Watchdog(a.pid)
    dog.start()
    m = a.chat_model
    chat, resp, msgs, count = "/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"

    # 1. Schema bombs (memory grew by gigabytes) and schemas no value satisfies.
    for name, schema in [
        ("minLength > maxLength", {"type": "string", "minLength": 10, "maxLength": 2}),
        ("minItems > maxItems", {"type": "array", "minItems": 10, "maxItems": 2}),
        ("pattern ^a{5,2}$", {"type": "string", "pattern": "^a{5,2}$"}),
        ("integer minimum 10 > maximum -5", {"type": "integer", "minimum": 10, "maximum": -5}),
    ]:
        c.expect_4xx("chat schema " + name, chat, chat_body(m, schema_format(schema)), code="invalid_value")
        c.expect_4xx("responses schema " + name, resp, json.dumps(
            {"model": m, "input": "hi", "max_output_tokens": 4,
             "text": {"format": {"type": "json_schema", "name": "s", "schema": schema}}}), code="invalid_value")
    # 4. A huge enum (held a core for 44 s, not cancelled).
    t0 = time.monotonic()
    c.expect_4xx("chat schema enum of 100,000 values", chat,
                 chat_body(m, schema_format({"enum": [f"v{i}" for i in range(100000)]})), code="invalid_value")
    c.expect("  ... refused within 10 s", time.monotonic() - t0 < 10, f"{time.monotonic() - t0:.1f} s")

    # 2. Deep JSON on every JSON route (segfault).
    d = deep(50000)
    tool = '{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x": ' + d + "}}}"
    user = '"messages": [{"role": "user", "content": "hi"}]'
    c.expect_4xx("chat tools[].function.parameters 50,000 deep", chat,
                 '{"model": "%s", %s, "tools": [%s]}' % (m, user, tool), code="json_too_deep")
    c.expect_4xx("chat extra message field 50,000 deep", chat,
                 '{"model": "%s", "messages": [{"role": "user", "content": "hi", "x": %s}]}' % (m, d),
                 code="json_too_deep")
    c.expect_4xx("chat response_format schema 50,000 deep", chat,
                 '{"model": "%s", %s, "response_format": {"type": "json_schema", "json_schema": {"name": "s", '
                 '"schema": %s}}}' % (m, user, d), code="json_too_deep")
    c.expect_4xx("completions prompt 50,000 deep", "/v1/completions",
                 '{"model": "%s", "prompt": %s}' % (m, d), code="json_too_deep")
    c.expect_4xx("responses tools 50,000 deep", resp,
                 '{"model": "%s", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": %s}]}'
                 % (m, d), code="json_too_deep")
    anthropic_tools = ('{"model": "%s", "max_tokens": 4, %s, "tools": [{"name": "f", "input_schema": %s}]}'
                       % (m, user, d))
    c.expect_4xx("messages tools 50,000 deep", msgs, anthropic_tools, anthropic=True)
    c.expect_4xx("count_tokens tools 50,000 deep", count, anthropic_tools, anthropic=True)
    # 10x the limit (64 levels), as well as far past it.
    c.expect_4xx("chat tools 640 deep", chat, '{"model": "%s", %s, "tools": [%s]}'
                 % (m, user, tool.replace(d, deep(640))), code="json_too_deep")

    # 8. Anthropic routes answer in Anthropic's shape; count_tokens counts any length.
    c.expect_4xx("messages 30 MB body -> 413", msgs, b'{"model": "' + m.encode() + b'", "x": "' +
                 b"a" * (30 << 20) + b'"}', status=413, anthropic=True)
    long_text = " ".join(["word"] * 6000)
    got, text = c.post(count, json.dumps({"model": m, "messages": [{"role": "user", "content": long_text}]}),
                       anthropic=True)
    n = json.loads(text).get("input_tokens", 0) if got == 200 else 0
    c.expect("count_tokens over the context -> 200 with the count", got == 200 and n > 4096, f"{got} {text[:200]}")

    # 3, 5, 6. Live sessions.
    session_race(c, a.port, a.api_key, a.max_sessions)
    realtime_checks(c, a.port, a.api_key)

    time.sleep(0.5)
    dog.stop.set()
    dog.join()
    h = http.client.HTTPConnection(HOST, a.port, timeout=TIMEOUT)
    try:
        h.request("GET", "/health")
        alive = h.getresponse().status == 200
    except OSError:
        alive = False
    c.expect("the server is alive (/health)", alive)
    growth = dog.peak - idle
    c.expect(f"RSS within {a.rss_slack_mb:.0f} MB of idle (idle {idle:.0f} MB, peak {dog.peak:.0f} MB)",
             growth <= a.rss_slack_mb, f"grew {growth:.0f} MB")
    print(f"{c.checks - len(c.failures)} of {c.checks} checks passed")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
