"""An OpenAI-style chat server that writes engine traces as qdebug's vLLM plugin does (run as a subprocess on a loopback
port): every answer is "a red circle", and a request tagged `vllm_xargs.qdebug_id` gets the template engine trace
(`--template`) written into `--traces` under that id, through the plugin's own TraceDir (the `.qdt` linked in whole,
then its index line). By `--mode`:

`ok` every tagged request traced as it is; `nan` every trace's tensors all NaN; `none` nothing written (a plugin that is
not tracing: vLLM started beside another `qdebug` folder logs "not tracing this worker (ImportError ...)" and serves on);
`first` only the first request id seen is traced (the others never appear); `nan-first` the first request id's traces
all NaN, the others as they are.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from qdebug.engine.trace_dir import TraceDir
from qdebug.trace.schema import load_trace

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--mode", choices=["ok", "nan", "none", "first", "nan-first"], required=True)
parser.add_argument("--template", required=True)
parser.add_argument("--traces", required=True)
opts = parser.parse_args()
folder = TraceDir(opts.traces)
lock = threading.Lock()
first: list[str] = []
ANSWER = {"id": "x", "object": "chat.completion", "model": "demo",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "a red circle"}, "finish_reason": "stop"}]}


def write_trace(qdebug_id: str, n: int) -> None:
    """The template as the engine's trace of request `qdebug_id` (`<run>.<request>.<phase>`), per the mode."""
    rid = qdebug_id.split(".")[1]
    with lock:
        if not first:
            first.append(rid)
    if opts.mode == "none" or (opts.mode == "first" and rid != first[0]):
        return
    trace = load_trace(opts.template)
    trace.meta.engine = {**(trace.meta.engine or {}), "request_id": f"chatcmpl-{n}"}
    if opts.mode == "nan" or (opts.mode == "nan-first" and rid == first[0]):
        trace.tensors = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in trace.tensors.items()}
    folder.write(trace, qdebug_id, {"id": f"chatcmpl-{n}", "qdebug_id": qdebug_id})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    served = 0

    def log_message(self, *args) -> None:
        pass

    def _send(self, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "demo", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        Handler.served += 1
        tag = (body.get("vllm_xargs") or {}).get("qdebug_id")
        if tag:
            write_trace(tag, Handler.served)
        self._send(ANSWER)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", opts.port), Handler).serve_forever()
