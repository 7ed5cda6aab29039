"""`qdebug diff IMAGE PROMPT --engine URL [--engine-traces DIR]`: one request through a vLLM that runs qdebug's
plugin and through qdebug's own transformers run of the same checkpoint, compared stage by stage.

The request is sent tagged (`vllm_xargs: {"qdebug_trace": true, "qdebug_id": ...}`) with a fresh `cache_salt` and media
`uuid`s, so vLLM computes all of it (a traced request reads the caches like any other); its engine trace is read
from the server's trace folder (`--engine-traces`), or, without one, fetched from the server's own port when it
runs qdebug's endpoint plugin (`VLLM_PLUGINS=qdebug`, `GET /qdebug/traces/...`); the local reference runs with the engine's dtype unless `--dtype` says
otherwise. Two traces of different prompt tokens are refused, naming the first token that differs (another
chat template or tokenizer on the server).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from qdebug.engine.trace_dir import TRACE_NAME, index_entries
from qdebug.errors import EngineTraceError, IncompatibleTracesError, InputError, UnreachableError

from .diff_run import Comparison, DiffRun

POLL_S = 0.1


def run_engine_diff(args, models: dict | None = None) -> DiffRun:
    """Send each order's request to the engine, read its trace, trace it locally, and compare (A local, B engine)."""
    from qdebug.analysis.diff import diff_traces
    from qdebug.commands.common import loading, quiet_transformers
    from qdebug.model.load import load_model
    from qdebug.replay.endpoint import EndpointSettings, check_endpoint_settings

    from .diff_inputs import diff_requests
    from .diff_side import DiffSide, trace_side

    settings = EndpointSettings(url=args.engine, served_model=args.served_model, api_key_env=args.api_key_env, timeout=args.timeout)
    base, key = check_endpoint_settings(settings)
    folder = Path(args.engine_traces) if args.engine_traces else None
    if folder is not None and not folder.is_dir():
        raise InputError(f"--engine-traces {args.engine_traces}: expected the folder the server writes traces to "
                         "(its QDEBUG_VLLM_TRACE_DIR), on a filesystem this machine can read")
    requests = [(order, as_sent(request)) for order, request in diff_requests(args)]
    quiet_transformers()
    cache: dict = {} if models is None else models
    results = []
    with _client(base, key, settings.timeout) as client:
        served, aliases = _served_model(client, settings, base)
        for order, request in requests:
            tag = f"qdebug-diff-{uuid.uuid4().hex[:12]}"
            answer = _send(client, request, served, tag, base, settings)
            engine = await_trace(folder if folder is not None else HttpTraces(client, base), tag, settings.timeout)
            check_engine_model(engine, served, aliases, tag)
            dtype = engine.meta.model.get("dtype", "float32") if args.dtype == "auto" else args.dtype
            side = DiffSide(f"A transformers {dtype}", device=args.device, dtype=dtype, attn_kernel=args.attn_kernel)
            k = (args.model, side.device, side.dtype, side.attn_kernel)
            if k not in cache:
                with loading(args.model):
                    cache[k] = load_model(args.model, side.device, side.dtype, side.attn_kernel)
            local, found = trace_side(cache[k], side, request)
            _same_prompt(local, engine)
            info = engine.meta.engine or {}
            label = f"B {info.get('name', 'engine')} {info.get('version', '')} {engine.meta.model.get('dtype', '')} ({args.engine})"
            result = diff_traces(local, engine, atol=args.atol, rtol=args.rtol, a_label=side.label, b_label=label,
                                 extra_findings=[*found, *_engine_side(engine), *_answer_findings(answer, engine)])
            results.append(Comparison(order, result, local, engine))
    return DiffRun(results)


def as_sent(request):
    """The request with each video's frames as the engine will decode them: a video travels as vLLM's JPEG frames (the
    content codec), so the local reference runs those same pixels and the engine is sent the same bytes."""
    if not request.videos:
        return request
    import dataclasses

    from qdebug.replay.formats.capture_video import load_video_url
    from qdebug.replay.formats.content import CAPTURED_URL, encode_content

    urls = [part["video_url"]["url"] for part in encode_content(request) if part.get("type") == "video_url"]
    videos = []
    for video, url in zip(request.videos, urls):
        decoded, _ = load_video_url(url, Path.cwd(), False, InputError)  # a data: URL: no path is read
        sent = dataclasses.replace(video, frames=decoded.frames)
        setattr(sent, CAPTURED_URL, url)
        videos.append(sent)
    return dataclasses.replace(request, videos=videos)


def _client(base: str, key: str | None, timeout: float):
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base, timeout=timeout, headers=headers, follow_redirects=False)


def _served_model(client, settings, base: str) -> tuple[str, tuple[str, ...]]:
    """--served-model, else the first model the server lists; and what else the listing says it is (model_aliases)."""
    import httpx

    from qdebug.replay.endpoint import model_aliases

    try:
        response = client.get("/models")
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise UnreachableError(f"cannot reach {base} ({type(exc).__name__}); is the vLLM server running?") from None
    except (httpx.HTTPError, OSError) as exc:
        raise EngineTraceError(f"{base}/models failed ({type(exc).__name__}); is it a vLLM server?") from None
    if settings.served_model:
        return settings.served_model, model_aliases(response, settings.served_model)
    try:
        name = str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise EngineTraceError(f"{base}/models lists no model; name it with --served-model") from None
    return name, model_aliases(response, name)


def check_engine_model(trace, served: str, aliases: tuple[str, ...], tag: str) -> None:
    """The one rule for an engine trace's model (`diff --engine` and `replay --endpoint --engine-traces`): it was
    recorded by a serving engine serving the model the client asked for, by that name or by what /v1/models says it
    is (its checkpoint, its base model); IncompatibleTracesError (exit 5) otherwise: another server's traces."""
    model = trace.meta.model if isinstance(trace.meta.model, dict) else {}
    names = {model.get("spec"), model.get("path")} - {None}
    if trace.meta.engine and names & {served, *aliases}:
        return
    what = f"model {model.get('spec')!r} ({model.get('path')})" if trace.meta.engine else "no serving engine (not an engine trace)"
    asked = f"{served!r}" + (f" ({', '.join(aliases)})" if aliases else "")
    raise IncompatibleTracesError(f"the engine trace of request {tag} records {what}, but the server was asked for {asked}: "
                                  "expected the traces of the server the requests went to (its QDEBUG_VLLM_TRACE_DIR)")


def _send(client, request, served: str, tag: str, base: str, settings) -> str:
    """POST the tagged request (greedy, as the local run) with fresh cache identities (a `cache_salt` and a `uuid` per
    media part: no cache serves it another run's work, so its trace holds every prompt position, as the local run's);
    the answer's text."""
    import httpx

    from qdebug.replay.endpoint import chat_body, isolated, server_message

    body = isolated(chat_body(request, served, top_logprobs=5), settings, tag, "diff")
    body["vllm_xargs"] = {"qdebug_trace": True, "qdebug_id": tag}
    try:
        response = client.post("/chat/completions", json=body)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise UnreachableError(f"cannot reach {base} ({type(exc).__name__}: {exc}); is the vLLM server running?") from None
    except (httpx.HTTPError, OSError) as exc:
        raise EngineTraceError(f"{base} did not answer the request ({type(exc).__name__}: {exc})") from None
    if response.status_code >= 300:
        raise EngineTraceError(f"{base} answered HTTP {response.status_code}: {server_message(response)}")
    try:
        return str(response.json()["choices"][0]["message"]["content"] or "")
    except (ValueError, KeyError, IndexError, TypeError):
        raise EngineTraceError(f"{base} sent an answer that is not a chat completion") from None


class HttpTraces:
    """The server's trace folder through qdebug's endpoint plugin (`GET /qdebug/traces/...` on the server's port)."""

    def __init__(self, client, base: str) -> None:
        self.client = client
        self.root = base.removesuffix("/v1")
        self.where = f"{self.root}/qdebug/traces"

    def find(self, tag: str) -> dict | None:
        """The index line of request `tag`, once the server lists it."""
        response = self.client.get(f"{self.where}/index.jsonl")
        if response.status_code == 404 and "qdebug" not in response.text:  # no such route: the endpoint plugin is not loaded
            raise EngineTraceError(f"{self.root} does not serve qdebug's traces: start it with VLLM_PLUGINS=qdebug (and "
                                   "QDEBUG_VLLM_TRACE_DIR), or give --engine-traces DIR")
        found = None
        for line in index_entries(response.text.splitlines() if response.status_code == 200 else []):
            if line.get("qdebug_id") == tag:
                found = line
        return found

    def load(self, line: dict):
        """Download the trace the index line names into a temporary file and read it (qdebug's checks apply)."""
        import tempfile

        from qdebug.trace.schema import load_trace

        if not isinstance(line.get("trace"), str) or not TRACE_NAME.fullmatch(line["trace"]):
            raise EngineTraceError(f"{self.where}/index.jsonl names trace {str(line.get('trace'))[:200]!r} for request "
                                   f"{line.get('qdebug_id')}: expected NAME.qdt, a file of the trace folder")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "engine.qdt"
            with self.client.stream("GET", f"{self.where}/{line.get('trace')}") as response, open(path, "wb") as f:
                if response.status_code != 200:
                    raise EngineTraceError(f"{self.where}/{line.get('trace')} answered HTTP {response.status_code}")
                for chunk in response.iter_bytes():
                    f.write(chunk)
            return load_trace(path)


class FolderTraces:
    """The server's trace folder, read directly (`--engine-traces DIR`)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.where = folder, str(folder)

    def find(self, tag: str) -> dict | None:
        """The index line of request `tag`, once the plugin has written it."""
        from qdebug.engine.trace_dir import find_in_index

        return find_in_index(self.folder, "qdebug_id", tag)

    def load(self, line: dict):
        """Read the trace the index line names: only a file of the folder itself (not `../x.qdt`, `/etc/passwd`)."""
        from qdebug.engine.trace_dir import trace_in_folder
        from qdebug.trace.schema import load_trace

        path = trace_in_folder(self.folder, line.get("trace"))
        if path is None:
            raise EngineTraceError(f"{self.where}/index.jsonl names trace {str(line.get('trace'))[:200]!r} for request "
                                   f"{line.get('qdebug_id')}, which is not a trace file of that folder (expected NAME.qdt in it)")
        return load_trace(path)


class TraceMissing(EngineTraceError):
    """No trace of the request appeared within the time allowed (as against one that is there but unreadable)."""


def await_trace(source, tag: str, timeout: float):
    """The engine's trace of request `tag` from `source` (a folder, or HttpTraces), once the plugin has written it."""
    source = FolderTraces(Path(source)) if isinstance(source, (str, Path)) else source
    deadline = time.monotonic() + timeout
    while True:
        line = source.find(tag)
        if line is not None:
            return source.load(line)
        if time.monotonic() > deadline:
            raise TraceMissing(
                f"no trace of request {tag} appeared in {source.where} within {timeout:g} s: expected the server to run qdebug's "
                f"plugin with QDEBUG_VLLM_TRACE_DIR set (its log says 'qdebug: tracing')")
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


def _engine_side(engine) -> list:
    """What the engine's own trace observed that a stage diff cannot say: the layout its kernels received
    (seed 001), and deepstack rows added where Qwen3-VL adds none."""
    from qdebug.analysis.detectors.deepstack import deepstack_findings
    from qdebug.vocab import FindingKind

    return [f for f in engine.findings if f.kind == FindingKind.LAYOUT] + deepstack_findings(engine)


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
