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
    max_answer_mb: float = 64.0
    model: str | None = None  # --model: also run local references with qdebug's traced model
    engine_caches: str = "fresh"  # --engine-caches: fresh (cold phases isolated, then a warm phase), keep or cold (replay.endpoint)
    engine_traces: Path | None = None  # --engine-traces: the folder a vLLM running qdebug's plugin writes traces to


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
    from qdebug.replay.endpoint import FRESH, EndpointSettings, check_endpoint_settings, run_endpoint
    from qdebug.replay.formats.detect import read_batch

    settings = EndpointSettings(url=args.url, served_model=args.served_model, api_key_env=args.api_key_env, concurrency=args.concurrency,
                                speed=args.speed, repeat=args.repeat, timeout=args.timeout, retries=args.retries,
                                max_answer_mb=args.max_answer_mb, engine_caches=args.engine_caches)
    check_endpoint_settings(settings)
    folder: Path | None = None  # --engine-traces, checked
    if args.engine_traces is not None:
        import uuid

        folder = Path(args.engine_traces)
        if folder.exists() and not folder.is_dir():
            raise InputError(f"--engine-traces {args.engine_traces}: is a file; expected the folder the vLLM server writes traces to "
                             "(its QDEBUG_VLLM_TRACE_DIR)")
        try:  # a folder that does not exist yet is made (parents too): the server may not have written to it yet
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--engine-traces {args.engine_traces}: cannot create the folder ({e.strerror})") from None
        settings.engine_tag = f"qdebug-replay-{uuid.uuid4().hex[:12]}"
    batch = read_batch(args.file, args.format, args.allow_paths)
    if batch.kind != "capture":
        raise InputError(f"{args.file}: --endpoint replays a capture (JSONL of chat-completions bodies), not a {batch.kind}")
    local, local_traces = _local_references(batch, args, keep_traces=settings.engine_tag is not None) if args.model else (None, {})
    total = sum(1 for r in batch.requests if r.request is not None)
    from qdebug.commands.common import two_phase_progress

    warm = settings.engine_caches == FRESH  # a warm phase follows the bursts when the server is vLLM
    with two_phase_progress(console, (f"isolated, one at a time → {args.url}", total),
                            (f"burst × {args.repeat}" + (", then warm" if warm else ""), total * (args.repeat + warm)), "errors") as on_progress:
        run = run_endpoint(batch, settings, on_progress)
    report = report_from_endpoint(batch, run, local)
    from .endpoint_caches import judge_caches

    judge_caches(report, run, folder if settings.engine_tag else None, settings, local_traces)
    return report


def _local_references(batch, args: EndpointArgs, keep_traces: bool = False) -> tuple[dict, dict]:
    """Each request's isolated answer from qdebug's own traced model (the model's true answer), and with `keep_traces`
    its trace with every prompt row of every layer (what the engine's traces are compared with, stage by stage)."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.replay.formats.content import ContentError
    from qdebug.trace.runner import RecordPolicy, trace_request

    from .engine_diff import as_sent

    quiet_transformers()
    loaded = args.load()
    texts, traces = {}, {}
    for r in batch.requests:
        if r.request is not None:
            try:  # a video travels as JPEG frames (the content codec, as the replay sends it): the model sees those pixels
                request = as_sent(r.request)
            except ContentError:  # an item that cannot travel: the replay reports the request as an error
                request = r.request
            trace = trace_request(loaded, request, RecordPolicy(attn_layers=set(), keep_hidden=keep_traces))
            texts[r.request_id] = trace.generated_text
            if keep_traces:
                traces[r.request_id] = trace
    return texts, traces
