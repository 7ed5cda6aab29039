"""`qdebug diff IMAGE PROMPT --engine URL --engine-traces DIR`: one request through a vLLM that runs qdebug's
plugin and through qdebug's own transformers run of the same checkpoint, compared stage by stage.

The request is sent tagged (`vllm_xargs: {"qdebug_trace": true, "qdebug_id": ...}`); its engine trace is read
from the server's trace folder; the local reference runs with the engine's dtype unless `--dtype` says
otherwise. Two traces of different prompt tokens are refused, naming the first token that differs (another
chat template or tokenizer on the server).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from qdebug.errors import EngineTraceError, IncompatibleTracesError, InputError

from .diff_run import Comparison, DiffRun

POLL_S = 0.1


def run_engine_diff(args, models: dict | None = None) -> DiffRun:
    """Send each order's request to the engine, read its trace, trace it locally, and compare (A local, B engine)."""
    from qdebug.analysis.diff import diff_traces
    from qdebug.commands.common import loading, quiet_transformers
    from qdebug.model.load import load_model
    from qdebug.replay.endpoint import EndpointSettings, check_endpoint_settings

    from .diff import DiffSide, _requests, _trace

    settings = EndpointSettings(url=args.engine, served_model=args.served_model, api_key_env=args.api_key_env, timeout=args.timeout)
    base, key = check_endpoint_settings(settings)
    folder = Path(args.engine_traces) if args.engine_traces else None
    if folder is None or not folder.is_dir():
        raise InputError(f"--engine-traces {args.engine_traces}: expected the folder the server writes traces to "
                         "(its QDEBUG_VLLM_TRACE_DIR), on a filesystem this machine can read")
    requests = _requests(args)
    quiet_transformers()
    cache: dict = {} if models is None else models
    results = []
    with _client(base, key, settings.timeout) as client:
        served = _served_model(client, settings, base)
        for order, request in requests:
            tag = f"qdebug-diff-{uuid.uuid4().hex[:12]}"
            answer = _send(client, request, served, tag, base)
            engine = await_trace(folder, tag, settings.timeout)
            dtype = engine.meta.model.get("dtype", "float32") if args.dtype == "auto" else args.dtype
            side = DiffSide(f"A transformers {dtype}", device=args.device, dtype=dtype, attn_kernel=args.attn_kernel)
            k = (args.model, side.device, side.dtype, side.attn_kernel)
            if k not in cache:
                with loading(args.model):
                    cache[k] = load_model(args.model, side.device, side.dtype, side.attn_kernel)
            local, found = _trace(cache[k], side, request)
            _same_prompt(local, engine)
            info = engine.meta.engine or {}
            label = f"B {info.get('name', 'engine')} {info.get('version', '')} {engine.meta.model.get('dtype', '')} ({args.engine})"
            result = diff_traces(local, engine, atol=args.atol, rtol=args.rtol, a_label=side.label, b_label=label,
                                 extra_findings=[*found, *_answer_findings(answer, engine)])
            results.append(Comparison(order, result, local, engine))
    return DiffRun(results)


def _client(base: str, key: str | None, timeout: float):
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base, timeout=timeout, headers=headers, follow_redirects=False)


def _served_model(client, settings, base: str) -> str:
    """--served-model, else the first model the server lists."""
    import httpx

    if settings.served_model:
        return settings.served_model
    try:
        return str(client.get("/models").json()["data"][0]["id"])
    except (httpx.HTTPError, OSError) as exc:
        raise EngineTraceError(f"cannot reach {base} ({type(exc).__name__}); is the vLLM server running?") from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise EngineTraceError(f"{base}/models lists no model; name it with --served-model") from None


def _send(client, request, served: str, tag: str, base: str) -> str:
    """POST the tagged request (greedy, as the local run); the answer's text."""
    import httpx

    from qdebug.replay.endpoint import _server_message, chat_body

    body = chat_body(request, served, top_logprobs=5)
    body["vllm_xargs"] = {"qdebug_trace": True, "qdebug_id": tag}
    try:
        response = client.post("/chat/completions", json=body)
    except (httpx.HTTPError, OSError) as exc:
        raise EngineTraceError(f"cannot reach {base} ({type(exc).__name__}: {exc}); is the vLLM server running?") from None
    if response.status_code >= 300:
        raise EngineTraceError(f"{base} answered HTTP {response.status_code}: {_server_message(response)}")
    try:
        return str(response.json()["choices"][0]["message"]["content"] or "")
    except (ValueError, KeyError, IndexError, TypeError):
        raise EngineTraceError(f"{base} sent an answer that is not a chat completion") from None


def await_trace(folder: Path, tag: str, timeout: float):
    """The engine's trace of request `tag`, once the plugin has written it (polls the folder's index.jsonl)."""
    from qdebug.engine.trace_dir import find_in_index
    from qdebug.trace.schema import load_trace

    deadline = time.monotonic() + timeout
    while True:
        line = find_in_index(folder, "qdebug_id", tag)
        if line is not None:
            return load_trace(folder / str(line.get("trace")))
        if time.monotonic() > deadline:
            raise EngineTraceError(
                f"no trace of request {tag} appeared in {folder} within {timeout:g} s: expected the server to run qdebug's "
                f"plugin with QDEBUG_VLLM_TRACE_DIR={folder} (its log says 'qdebug: tracing')")
        time.sleep(POLL_S)


def _same_prompt(local, engine) -> None:
    """Refuse two runs of different prompt tokens, naming the first token that differs."""
    a, b = local.input_ids, engine.input_ids
    if a == b:
        return
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    tok = lambda t, i: repr(t.tokens[i]) if i < len(t.tokens) else "(end)"
    raise IncompatibleTracesError(
        f"the engine ran other prompt tokens than the local processor ({len(b)} vs {len(a)} tokens; first difference at "
        f"position {at}: engine {tok(engine, at)}, local {tok(local, at)}): expected the server to serve the same checkpoint "
        "with its own chat template (--model names it here)")


def _answer_findings(answer: str, engine) -> list:
    """What the client received against the text of the tokens the engine traced."""
    from qdebug.analysis.endpoint import whitespace_finding
    from qdebug.findings import Finding
    from qdebug.vocab import FindingKind, Severity

    traced = engine.generated_text
    if answer == traced:
        return []
    if answer.strip() == traced.strip():
        return [whitespace_finding(answer, traced)]
    return [Finding(FindingKind.ENGINE_ANSWER, Severity.ERROR,
                    f"the client received {answer!r} but the tokens the engine traced read {traced!r}")]
