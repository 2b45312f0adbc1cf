"""A local HTTP server speaking the Anthropic Messages API and the OpenAI chat API.

For tests, demos and the chaos benchmark: the real ``anthropic`` SDK and specrag's
OpenAI-compatible client talk to it over loopback. Replies come from ``responder``
(default: the first sentence of the first quoted document, cited as [1], so answers
are grounded and deterministic). Faults can be injected per request, from a queue
(``server.faults.extend(["429", "cut"])``) or at random with a seeded ``fault_rate``:
``429`` (with retry-after), ``500``, ``529`` (overloaded), ``hang`` (no response for
``hang_s``), ``slow`` (first token after ``slow_s``), ``cut`` (stream stops mid-way)
and ``malformed`` (invalid JSON in the stream).

Deliberately not here: tokenisation (a word is a token) or any real model.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from specrag.grounding.text import split_sentences

FAULTS = ("429", "500", "529", "hang", "slow", "cut", "malformed")
_DOC = re.compile(r"<document[^>]*>\s*(.*?)\s*</document>", re.S)


def first_sentence_answer(messages: list[dict]) -> str:
    text = "\n".join(m["content"] if isinstance(m["content"], str) else
                     " ".join(b.get("text", "") for b in m["content"]) for m in messages)
    docs = _DOC.findall(text)
    if not docs:
        return "The documents do not say."
    sentence = (split_sentences(docs[0]) or [""])[0]
    return f"{sentence} [1]"


class MockAPI:
    def __init__(self, responder=first_sentence_answer, fault_rate: float = 0.0,
                 faults: tuple[str, ...] = FAULTS, seed: int = 0, token_delay_s: float = 0.0,
                 hang_s: float = 30.0, slow_s: float = 3.0):
        self.responder = responder
        self.fault_rate = fault_rate
        self.fault_kinds = faults
        self.faults: list[str] = []  # forced faults for the next requests, in order
        self.rng = random.Random(seed)
        self.token_delay_s = token_delay_s
        self.hang_s = hang_s
        self.slow_s = slow_s
        self.requests: list[dict] = []  # every request body received, with its fault
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self, port: int = 0) -> "MockAPI":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_):  # keep test output clean
                pass

            def do_POST(self):
                api._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- requests ------------------------------------------------------------------
    def _next_fault(self) -> str | None:
        with self._lock:
            if self.faults:
                return self.faults.pop(0)
            if self.fault_rate and self.rng.random() < self.fault_rate:
                return self.rng.choice(self.fault_kinds)
        return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = json.loads(h.rfile.read(int(h.headers.get("Content-Length", 0))) or b"{}")
        fault = self._next_fault()
        # "ended": how a stream ended, "complete" or "client closed" (None until then)
        record = {"path": h.path, "body": body, "fault": fault, "ended": None,
                  "headers": {k.lower(): v for k, v in h.headers.items()}}
        with self._lock:
            self.requests.append(record)
        openai = h.path.rstrip("/").endswith("/chat/completions")
        if fault in ("429", "500", "529"):
            code = int(fault)
            err = {"429": "rate_limit_error", "500": "api_error", "529": "overloaded_error"}[fault]
            payload = json.dumps({"type": "error", "error": {"type": err, "message": err}}).encode()
            h.send_response(code)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            if code == 429:
                h.send_header("retry-after", "0")
            h.end_headers()
            h.wfile.write(payload)
            return
        if fault == "hang":
            time.sleep(self.hang_s)
            return
        messages = list(body.get("messages", []))
        if body.get("system"):
            messages.insert(0, {"role": "system", "content": body["system"]})
        words = self.responder(messages).split(" ")
        words = words[:max(1, int(body.get("max_tokens", 256)))]
        tokens_in = sum(len(str(m["content"]).split()) for m in messages)
        if not body.get("stream"):
            text = " ".join(words)
            payload = json.dumps(_openai_message(body, text, tokens_in, len(words)) if openai
                                 else _anthropic_message(body, text, tokens_in, len(words)))
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload.encode())
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        if fault == "slow":
            time.sleep(self.slow_s)
        events = (_openai_events if openai else _anthropic_events)(body, words, tokens_in)
        try:
            for i, event in enumerate(events):
                if fault == "cut" and i == 3:
                    break  # connection closes mid-stream
                if fault == "malformed" and i == 3:
                    h.wfile.write(b"data: {not json\n\n")
                    h.wfile.flush()
                    break
                h.wfile.write(event.encode())
                h.wfile.flush()
                if self.token_delay_s:
                    time.sleep(self.token_delay_s)
            record["ended"] = "complete"
        except (BrokenPipeError, ConnectionResetError):  # the client cancelled
            record["ended"] = "client closed"
        h.close_connection = True


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _anthropic_message(body, text, tokens_in, tokens_out) -> dict:
    return {"id": "msg_mock", "type": "message", "role": "assistant", "model": body.get("model"),
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}


def _anthropic_events(body, words, tokens_in):
    msg = _anthropic_message(body, "", tokens_in, 1)
    msg.update(content=[], stop_reason=None)  # as the real API: known only at the end
    yield _sse("message_start", {"type": "message_start", "message": msg})
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})
    for i, w in enumerate(words):
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta",
                                                     "text": w if i == 0 else " " + w}})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": len(words)}})
    yield _sse("message_stop", {"type": "message_stop"})


def _openai_message(body, text, tokens_in, tokens_out) -> dict:
    return {"id": "chatcmpl-mock", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}}


def _openai_events(body, words, tokens_in):
    base = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": body.get("model")}
    for i, w in enumerate(words):
        yield "data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {
            "content": w if i == 0 else " " + w}, "finish_reason": None}]}) + "\n\n"
    yield "data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {},
                                                      "finish_reason": "stop"}]}) + "\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        yield "data: " + json.dumps({**base, "choices": [], "usage": {
            "prompt_tokens": tokens_in, "completion_tokens": len(words)}}) + "\n\n"
    yield "data: [DONE]\n\n"
