"""A /metrics endpoint that answers badly on purpose (stdlib only; run as a subprocess on a loopback port).

Modes: `trickle` sends a valid watch answer one byte per second; `bomb` a gzip body that expands to `--mb` MiB;
`big` an uncompressed body of `--mb` MiB (chunked: no size announced); `endless` chunks that never end. GET /v1/models
answers (tests/servers.py waits on it).
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
parser.add_argument("--mode", choices=["trickle", "bomb", "big", "endless"], required=True)
parser.add_argument("--mb", type=int, default=1024)
opts = parser.parse_args()

VALID = b'qdebug_watch_checks_total{check="placement"} 3.0\nqdebug_watch_violations_total{check="placement"} 0.0\n'
FILLER = (b"# " + b"x" * 1021 + b"\n") * 1024  # 1 MiB of Prometheus comment lines


def _bomb(mb: int) -> bytes:
    """A gzip stream of `mb` MiB of comment lines, then the watch's series, compressed about a thousandfold."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as gz:
        for _ in range(mb):
            gz.write(FILLER)
        gz.write(VALID)
    return out.getvalue()


BOMB = _bomb(opts.mb) if opts.mode == "bomb" else b""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _head(self, extra: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path != "/metrics":
            body = json.dumps({"object": "list", "data": [{"id": "hostile", "object": "model"}]}).encode()
            self._head({"Content-Length": str(len(body))})
            self.wfile.write(body)
            return
        try:
            if opts.mode == "trickle":
                self._head({"Content-Length": str(len(VALID))})
                for i in range(len(VALID)):
                    self.wfile.write(VALID[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1)
            elif opts.mode == "bomb":
                self._head({"Content-Length": str(len(BOMB)), "Content-Encoding": "gzip"})
                self.wfile.write(BOMB)
            else:  # big, endless: chunked, so no size is announced
                self._head({"Transfer-Encoding": "chunked"})
                sent = 0
                while opts.mode == "endless" or sent < opts.mb:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(FILLER), FILLER))
                    sent += 1
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(VALID), VALID))
        except OSError:  # the client gave up: what it should do
            return


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", opts.port), Handler).serve_forever()
