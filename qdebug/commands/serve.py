"""`qdebug serve`: load a model once and serve it over HTTP (OpenAI chat completions), tracing every request."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from qdebug.errors import InputError
from qdebug.model.choice import ModelChoice


@dataclass(kw_only=True)
class ServeArgs(ModelChoice):
    """Everything `qdebug serve` was asked for (the model: `ModelChoice`'s fields)."""

    host: str = "127.0.0.1"
    port: int = 8000
    traces: Path | None = None
    inject: str = "none"
    seed: int = 0
    served_model: str | None = None
    wave_window: float = 0.5


def check_serve_args(args: ServeArgs) -> None:
    """Refuse a bad fault, a traces path that is a file, or a port that is taken, before loading anything."""
    from qdebug.replay.engine import parse_inject

    parse_inject(args.inject)
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected 0..65535")
    if args.wave_window <= 0:
        raise InputError(f"--wave-window {args.wave_window}: expected a positive number of seconds")
    if args.traces is not None:
        if args.traces.exists() and not args.traces.is_dir():
            raise InputError(f"--traces {args.traces}: exists and is not a directory (expected a directory for the .qdt files)")
        try:
            args.traces.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"--traces {args.traces}: cannot create it ({exc.strerror or exc})") from None
        if not os.access(args.traces, os.R_OK | os.W_OK | os.X_OK):
            raise InputError(f"--traces {args.traces}: not readable and writable (expected a folder qdebug may list and write)")
    try:
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as probe:
            probe.bind((args.host, args.port))
    except OSError as exc:
        raise InputError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); pick another --port or --host") from None


def run_serve(args: ServeArgs) -> None:
    """Load the model and serve until Ctrl-C (uvicorn), telling stderr where it listens."""
    check_serve_args(args)
    from qdebug.commands.common import quiet_transformers

    quiet_transformers()
    loaded = args.load()
    import uvicorn

    from qdebug.serve.app import ServeSettings, build_app

    name = args.served_model or ("qdebug-demo" if args.model == "demo" else args.model)
    settings = ServeSettings(model_name=name, traces=args.traces, inject=args.inject, seed=args.seed, wave_window=args.wave_window)
    app = build_app(loaded, settings)
    where = f"http://{args.host}:{args.port}"
    traces = f"{args.traces}, from {app.state.tracer.first_number:06d}.qdt" if args.traces is not None else "not saved"
    print(f"qdebug serve: {name} on {where}/v1 (inject {args.inject}, seed {args.seed}; traces: {traces})", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()
