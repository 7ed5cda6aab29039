"""An OpenAI-style chat server that answers badly on purpose (stdlib only; run as a subprocess on a loopback port).

Modes: `nan` answers with a NaN logprob; `bigint` with a logprob that is a 401-digit integer; `trickle` sends its answer one byte per second; `bomb` sends a gzip body
that expands to `--mb` megabytes; `big` sends an uncompressed body of `--mb` megabytes (no Content-Length).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--mode", choices=["nan", "bigint", "trickle", "bomb", "big"], required=True)
parser.add_argument("--mb", type=int, default=1024)
opts = parser.parse_args()


def _answer(logprob: str = "-0.5") -> bytes:
    body = {"id": "x", "object": "chat.completion", "model": "hostile", "choices": [{
        "index": 0, "message": {"role": "assistant", "content": "a red circle"}, "finish_reason": "stop",
        "logprobs": {"content": [{"token": "a", "logprob": 0.0, "top_logprobs": [
            {"token": "a", "logprob": "LP"}, {"token": "b", "logprob": -2.0}]}]}}]}
    return json.dumps(body).replace('"LP"', logprob).encode()


def _bomb(mb: int) -> bytes:
    """A gzip stream of `mb` MiB of spaces (valid JSON whitespace), compressed about a thousandfold."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as gz:
        gz.write(b'{"choices": [')
        chunk = b" " * (1 << 20)
        for _ in range(mb):
            gz.write(chunk)
        gz.write(b"]}")
    return out.getvalue()


BOMB = _bomb(opts.mb) if opts.mode == "bomb" else b""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _send(self, body: bytes, extra: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(json.dumps({"object": "list", "data": [{"id": "hostile", "object": "model"}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if opts.mode == "nan":
            self._send(_answer("NaN"))
        elif opts.mode == "bigint":
            self._send(_answer("1" + "0" * 400))
        elif opts.mode == "bomb":
            self._send(BOMB, {"Content-Encoding": "gzip"})
        elif opts.mode == "trickle":
            body = _answer()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                return
        else:  # big: a body of --mb MiB, chunked, so no size is announced
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b" " * (1 << 20)
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b'{"a": ['), b'{"a": ['))
                for _ in range(opts.mb):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"2\r\n]}\r\n0\r\n\r\n")
            except OSError:
                return


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", opts.port), Handler).serve_forever()
