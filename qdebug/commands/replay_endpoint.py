"""`qdebug replay CAPTURE --endpoint URL`: the capture against a running server, with Rich progress."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.model.choice import ModelChoice

if TYPE_CHECKING:
    from qdebug.replay.report import ReplayReport


@dataclass(kw_only=True)
class EndpointArgs(ModelChoice):
    """What `qdebug replay CAPTURE --endpoint URL` was asked for (`model` None: no local references)."""

    file: Path  # a capture (JSONL of chat-completions bodies)
    url: str  # --endpoint
    format: str | None = None
    allow_paths: bool = False
    served_model: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = None
    speed: float = 1.0
    repeat: int = 1
    timeout: float = 120.0
    retries: int = 2
    model: str | None = None  # --model: also run local references with qdebug's traced model


def check_local_only_options(mode: str, inject: str, seed: int) -> None:
    """Options that act on qdebug's own re-execution make no sense against someone else's server."""
    from qdebug.errors import InputError

    if mode != "threads":
        raise InputError(f"--mode {mode} chooses how qdebug re-executes locally; with --endpoint the server decides (drop --mode)")
    if inject != "none" or seed != 0:
        raise InputError("--inject/--seed act on qdebug's own replay; to serve with a fault, run `qdebug serve --inject ... --seed S` and point --endpoint at it")


def run_endpoint_replay(args: EndpointArgs, console=None) -> ReplayReport:
    """Parse the capture, replay it against the endpoint (and locally with --model); returns a ReplayReport."""
    from qdebug.analysis.endpoint import report_from_endpoint
    from qdebug.errors import InputError
    from qdebug.replay.endpoint import EndpointSettings, check_endpoint_settings, run_endpoint
    from qdebug.replay.formats.detect import read_batch

    settings = EndpointSettings(url=args.url, served_model=args.served_model, api_key_env=args.api_key_env, concurrency=args.concurrency,
                                speed=args.speed, repeat=args.repeat, timeout=args.timeout, retries=args.retries)
    check_endpoint_settings(settings)
    batch = read_batch(args.file, args.format, args.allow_paths)
    if batch.kind != "capture":
        raise InputError(f"{args.file}: --endpoint replays a capture (JSONL of chat-completions bodies), not a {batch.kind}")
    local = _local_references(batch, args) if args.model else None
    total = sum(1 for r in batch.requests if r.request is not None)
    from qdebug.commands.common import two_phase_progress

    with two_phase_progress(console, (f"isolated, one at a time → {args.url}", total), (f"burst × {args.repeat}", total * args.repeat),
                            "errors") as on_progress:
        run = run_endpoint(batch, settings, on_progress)
    return report_from_endpoint(batch, run, local)


def _local_references(batch, args: EndpointArgs) -> dict:
    """Each request's isolated answer from qdebug's own traced model (the model's true answer)."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.trace.runner import RecordPolicy, trace_request

    quiet_transformers()
    loaded = args.load()
    out = {}
    for r in batch.requests:
        if r.request is not None:
            out[r.request_id] = trace_request(loaded, r.request, RecordPolicy(attn_layers=set())).generated_text
    return out
