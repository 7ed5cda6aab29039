"""The FastAPI app of `qdebug serve`: `/v1/chat/completions` and `/v1/models`, every answer traced to disk."""

from __future__ import annotations

import itertools
import json
import math
import re
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from qdebug import strict_json
from qdebug.atomic import link_new
from qdebug.errors import first_line
from qdebug.replay.formats.content import PART_TYPE, media_parts
from qdebug.replay.fault_registry import Command, PlantContext, Planter, parse_inject
from qdebug.replay.events import EventLog


@dataclass
class ServeSettings:
    """What the server serves and how: its model name, where traces go, which fault, the seed, the wave window."""

    model_name: str = "qdebug-demo"
    traces: Path | None = None
    inject: str = "none"
    seed: int = 0
    wave_window: float = 0.5


class Tracer:
    """Runs one chat request through the traced model (with the injected fault) and files its trace."""

    def __init__(self, loaded, settings: ServeSettings) -> None:
        self.loaded, self.settings = loaded, settings
        injection = parse_inject(settings.inject, Command.SERVE)
        self.planter = (injection.planter(PlantContext(Command.SERVE, loaded, settings.seed, settings.wave_window))
                        if injection is not None else Planter())
        self.events = EventLog()
        # A random tag per server process: ids stay unique across restarts, and a temporary name is never shared.
        self.run_tag = secrets.token_hex(4)
        self.first_number = next_trace_number(settings.traces)  # continue after an earlier run's traces, never over them
        self._numbers = itertools.count(self.first_number)
        self._index_lock = threading.Lock()
        self.written = 0  # traces filed by this run (said on exit)
        self._empty = tempfile.mkdtemp(prefix="qdebug-serve-")  # image paths resolve here: nothing, so only data URLs load

    def parse(self, body: dict):
        """The body as a qdebug Request, or (None, reason) when it cannot be served."""
        from qdebug.replay.formats.capture import _parse_line

        refused = unsupported(body, frozenset(e.modality for e in self.loaded.adapter.encoders()))
        if refused:
            return None, refused
        entry = _parse_line(json.dumps({k: v for k, v in body.items() if k != "id"}), 1, Path(self._empty), False)
        return entry.request, entry.error

    def answer(self, body: dict, client_tag: str | None) -> tuple[int, dict]:
        """(HTTP status, OpenAI-style JSON) for one chat-completions body."""
        from qdebug.trace.runner import RecordPolicy, trace_request

        if body.get("stream"):
            return 400, _error("stream: true is not supported by qdebug serve (send stream: false)")
        request, error = self.parse(body)
        if request is None:
            return 400, _error(f"bad request: {error}")
        number = next(self._numbers)
        rid = f"chatcmpl-qd-{self.run_tag}-{number}"
        request.request_id = rid
        events = self.events.for_request(rid)
        faults = tuple(self.planter.faults(rid, request, events))
        from qdebug.replay.wave_gate import ServedBufferClient

        client = next((f for f in faults if isinstance(f, ServedBufferClient)), None)  # its wave and donors go in index.jsonl
        trace = trace_request(self.loaded, request, RecordPolicy(attn_layers=None), faults=faults, listener=events)
        self._file(number, rid, client_tag, trace, client)
        return 200, self._completion(rid, body, request, trace)

    def _file(self, number: int, rid: str, client_tag, trace, client) -> None:
        """Save the trace and append one line to index.jsonl naming it, its client tag and its buffer donors."""
        folder = self.settings.traces
        if folder is None:
            return
        from qdebug.trace.schema import save_trace

        tmp = folder / f".qdebug-serve-{self.run_tag}-{number}.qdt.tmp"
        try:
            save_trace(trace, tmp)
            number, name = self._claim(folder, tmp, number)
        finally:
            tmp.unlink(missing_ok=True)
        line = {
            "n": number, "id": rid, "client_request": client_tag, "trace": name, "answer": trace.generated_text,
            "wave": client.wave if client else None, "donors": list(client.donors) if client else [],
            "inject": self.settings.inject,
        }
        with self._index_lock, open(folder / "index.jsonl", "a", encoding="utf-8") as f:
            f.write(strict_json.dumps(line) + "\n")
            self.written += 1

    def _claim(self, folder: Path, tmp: Path, number: int) -> tuple[int, str]:
        """Hard-link the finished trace as `NNNNNN.qdt`, taking the next number while that name is taken.

        A link never replaces a file, so a trace from an earlier run (or another server on this folder) is kept.
        """
        while True:
            name = f"{number:06d}.qdt"
            try:
                link_new(tmp, folder / name)
                return number, name
            except FileExistsError:
                number = next(self._numbers)

    def _completion(self, rid: str, body: dict, request, trace) -> dict:
        eos = self.loaded.model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [eos])
        ids = trace.generated_ids
        finish = "stop" if ids and ids[-1] in eos else ("length" if len(ids) >= request.max_new_tokens else "stop")
        choice = {"index": 0, "message": {"role": "assistant", "content": trace.generated_text}, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            k = int(body.get("top_logprobs") or 0)
            choice["logprobs"] = {"content": [
                {"token": s.token, "logprob": _log(s.prob),
                 "top_logprobs": [{"token": t, "logprob": _log(p)} for t, p in zip(s.topk.tokens[:k], s.topk.probs[:k])]}
                for s in trace.steps
            ]}
        prompt = len(trace.input_ids)
        return {
            "id": rid, "object": "chat.completion", "created": int(time.time()), "model": self.settings.model_name,
            "choices": [choice], "usage": {"prompt_tokens": prompt, "completion_tokens": len(ids), "total_tokens": prompt + len(ids)},
        }


def unsupported(body: dict, takes: frozenset[str] | None = None) -> str | None:
    """Why a body asks for what this server does not do (in the client's terms), else None; `takes`: the media kinds
    the served model has encoders for (None: any)."""
    n = body.get("n", 1)
    if n != 1 or isinstance(n, bool):
        return f"n: {json.dumps(n)[:40]}; qdebug serve answers one choice per request (expected n: 1, or no n)"
    top = body.get("top_logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20):
        return f"top_logprobs: {json.dumps(top)[:40]}; expected a whole number from 0 to 20"
    if not isinstance(body.get("logprobs", False), bool | None):
        return f"logprobs: {json.dumps(body['logprobs'])[:40]}; expected true or false"
    for i, j, kind, part in media_parts(body):  # the shared content codec's part types (uuid and cache_salt are ignored)
        if takes is not None and kind not in takes:
            return (f"message {i} part {j} ({PART_TYPE[kind]}): the served model takes no {kind} "
                    f"(it takes text, {', '.join(PART_TYPE[k] for k in PART_TYPE if k in takes)})")
        url = part.get(PART_TYPE[kind])
        url = url.get("url") if isinstance(url, dict) else url
        if kind != "audio" and isinstance(url, str) and not url.strip().lower().startswith("data:"):
            return f"message {i} part {j} ({PART_TYPE[kind]}): only data: URLs are accepted here (send the {kind} inline as data:...;base64,...)"
    return None


_TRACE_NAME = re.compile(r"(\d+)\.qdt")


def next_trace_number(folder: Path | None) -> int:
    """The first trace number after those already in `folder` (its `NNNNNN.qdt` files and index.jsonl's `n`), else 1."""
    if folder is None or not folder.is_dir():
        return 1
    numbers = [int(m.group(1)) for p in folder.iterdir() if (m := _TRACE_NAME.fullmatch(p.name))]
    index = folder / "index.jsonl"
    if index.is_file():
        with open(index, encoding="utf-8", errors="replace") as f:
            for raw in f:
                try:
                    n = json.loads(raw).get("n")
                except (ValueError, AttributeError):
                    continue  # a torn or foreign line: the file names still count
                if isinstance(n, int) and not isinstance(n, bool):
                    numbers.append(n)
    return max(numbers, default=0) + 1


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -1e9


def _error(message: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind}}


def build_app(loaded, settings: ServeSettings):
    """The FastAPI app: sync handlers, so concurrent requests run concurrently on the server's thread pool."""
    tracer = Tracer(loaded, settings)
    app = FastAPI(title="qdebug serve", docs_url=None, redoc_url=None)
    app.state.tracer = tracer

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": settings.model_name, "object": "model", "created": 0, "owned_by": "qdebug"}]}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    def chat(body: dict, request: Request):
        model = body.get("model")
        if model not in (None, settings.model_name):
            return JSONResponse(_error(f"model {model!r} is not served here (this server serves {settings.model_name!r})", "not_found_error"), status_code=404)
        try:
            status, doc = tracer.answer(body, request.headers.get("x-qdebug-request"))
        except Exception as exc:  # one failing request answers 500 and the server keeps serving
            return JSONResponse(_error(first_line(exc), "server_error"), status_code=500)
        return JSONResponse(doc, status_code=status)

    return app
