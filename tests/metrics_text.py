"""A loopback HTTP server in the test's process that answers GET /metrics with a fixed text (a vLLM's /metrics as
`qdebug watch URL` reads it), for tests that run the installed `qdebug` against it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.servers import free_port


class _Metrics(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(self.body if self.path == "/metrics" else b"")

    def log_message(self, *args):
        pass


@contextmanager
def metrics_server(text: str) -> Iterator[str]:
    """The server's URL while the block runs; it answers `text` on /metrics, 404 elsewhere."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), type("Handler", (_Metrics,), {"body": text.encode()}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
