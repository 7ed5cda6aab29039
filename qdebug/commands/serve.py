"""`qdebug serve`: load a model once and serve it over HTTP (OpenAI chat completions), tracing every request."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from qdebug.errors import InputError
from qdebug.model.choice import ModelChoice
from qdebug.serve.limits import DEFAULT_MAX_BODY_MB, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT


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
    max_body_mb: float = DEFAULT_MAX_BODY_MB
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


def check_serve_args(args: ServeArgs) -> None:
    """Refuse a bad fault, a traces path that is a file, or a port that is taken, before loading anything."""
    from qdebug.replay.fault_registry import Command, parse_inject

    parse_inject(args.inject, Command.SERVE)  # a preset serve cannot plant is refused here, never served without it
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected 0..65535")
    if args.wave_window <= 0:
        raise InputError(f"--wave-window {args.wave_window}: expected a positive number of seconds")
    if not args.max_body_mb > 0:
        raise InputError(f"--max-body-mb {args.max_body_mb}: expected a positive number of megabytes")
    if args.max_connections < 1:
        raise InputError(f"--max-connections {args.max_connections}: expected at least 1")
    if not args.request_timeout > 0:
        raise InputError(f"--request-timeout {args.request_timeout}: expected a positive number of seconds")
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


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound now (so `--port 0` has its real port to print); InputError when taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port or --host") from None
    return sock


def run_serve(args: ServeArgs) -> None:
    """Load the model and serve until Ctrl-C or SIGTERM (uvicorn), telling stderr where it listens and, at the end,
    what it wrote."""
    check_serve_args(args)
    from qdebug.commands.common import quiet_transformers

    quiet_transformers()
    loaded = args.load()
    import uvicorn

    from qdebug.serve.app import ServeSettings, build_app
    from qdebug.serve.limits import BodyLimit, ClientLimits, guarded_protocol

    name = args.served_model or ("qdebug-demo" if args.spec == "demo" else args.spec)
    settings = ServeSettings(model_name=name, traces=args.traces, inject=args.inject, seed=args.seed, wave_window=args.wave_window)
    limits = ClientLimits(args.max_body_mb, args.max_connections, args.request_timeout)
    app = build_app(loaded, settings)
    sock = listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    where = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    tracer = app.state.tracer
    traces = f"{args.traces}, from {tracer.first_number:06d}.qdt" if args.traces is not None else "not saved"
    print(f"qdebug serve: {name} on {where}/v1 (inject {args.inject}, seed {args.seed}; traces: {traces})", file=sys.stderr, flush=True)
    config = uvicorn.Config(BodyLimit(app, limits), log_level="warning", access_log=False, http=guarded_protocol(limits))
    how = "stopped"
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt as exc:  # uvicorn shut down gracefully, then passed the signal on
        from qdebug.signals import Terminated

        how = "stopped (SIGTERM)" if isinstance(exc, Terminated) else "stopped (Ctrl-C)"
    finally:
        sock.close()
    print(f"qdebug serve: {how}; {wrote(args.traces, tracer.written)}", file=sys.stderr, flush=True)


def wrote(folder: Path | None, count: int) -> str:
    """What a serve run left on disk, in one phrase."""
    if folder is None:
        return "traces were not saved (no --traces)"
    return f"wrote {count} trace(s) to {folder}" + (" (listed in index.jsonl)" if count else "")
