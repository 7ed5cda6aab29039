"""Replay a capture against an OpenAI-compatible chat-completions server: each request alone, then the burst, then (vLLM)
the warm phase: the burst again with production caching.

An async httpx client: per-request timeouts, bounded concurrency, retries with backoff on connection resets
and 5xx (reported as such, never as contamination), one-line errors. The API key, when given, goes only in
the Authorization header of requests to the endpoint (redirects are not followed) and is never reported.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlparse

from qdebug.errors import InputError, QDebugError, UnreachableError

from .batch import Batch


# --engine-caches: FRESH: the cold phases (reference, bursts) with fresh identities, then a warm phase with production
# caching; KEEP: every phase with production caching (no warm phase: every phase is one); COLD: the cold phases only.
FRESH, KEEP, COLD = "fresh", "keep", "cold"
ENGINE_CACHES = (FRESH, KEEP, COLD)
NOT_SENT = "not_sent"  # the server does not list itself as vLLM: its caches are not controlled, nothing sent it might refuse
VLLM_OWNER = "vllm"  # what vLLM's /v1/models says each model is `owned_by`
REFERENCE, WARM = "reference", "warm"  # the isolated phase and the warm phase (bursts are `burst-K`)

# A chat answer is kilobytes (a few MB with logprobs); far above that it is a broken or hostile server.
DEFAULT_MAX_ANSWER_MB = 64.0


class AnswerTooLarge(Exception):
    """An answer passed --max-answer-mb (announced or counted while its decompressed bytes arrived)."""


@dataclass
class Body:
    """A whole (size-capped) answer: what `server_message` and the parsers read."""

    status_code: int
    content: bytes
    reason_phrase: str = ""

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def json(self):
        """The body as JSON (ValueError when it is not)."""
        import json

        return json.loads(self.content)


async def fetch(client, method: str, url: str, settings: "EndpointSettings", **kwargs) -> Body:
    """One request whose whole answer must arrive within --timeout (not per byte: a server trickling one byte a second
    is cut off) and stay within --max-answer-mb once decompressed; TimeoutError or AnswerTooLarge otherwise."""
    cap = int(settings.max_answer_mb * 2**20)
    async with asyncio.timeout(settings.timeout):
        async with client.stream(method, url, **kwargs) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > cap and not response.headers.get("content-encoding"):
                raise AnswerTooLarge(f"announced {int(declared):,} bytes")
            parts, size = [], 0
            async for chunk in response.aiter_bytes():  # decompressed as it arrives: one network read at a time
                size += len(chunk)
                if size > cap:
                    raise AnswerTooLarge(f"over {cap:,} bytes{' once decompressed' if response.headers.get('content-encoding') else ''}")
                parts.append(chunk)
            return Body(response.status_code, b"".join(parts), response.reason_phrase)


def too_large(settings: "EndpointSettings", exc: AnswerTooLarge) -> str:
    """The one-line error for an answer over the limit, naming the option."""
    return f"answer too large: {exc} (the limit is --max-answer-mb {settings.max_answer_mb:g})"


class EndpointError(QDebugError):
    """The endpoint cannot be used at all (refuses the key, redirects, names no model): exit 6, as a server that cannot
    be reached; 1 is for problems found in what a server answered."""

    exit_code = 6


@dataclass
class EndpointSettings:
    """Where to send the capture and how: schedule, repeats, timeouts, retries."""

    url: str
    served_model: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = None  # None: honour the capture's arrival_ts schedule
    speed: float = 1.0
    repeat: int = 1
    timeout: float = 120.0
    retries: int = 2
    backoff: float = 0.25
    top_logprobs: int = 5
    max_answer_mb: float = DEFAULT_MAX_ANSWER_MB  # an answer's size once decompressed (a gzip bomb, a runaway body)
    engine_caches: str = FRESH  # --engine-caches (FRESH, KEEP or COLD above)
    run_id: str = field(default_factory=lambda: secrets.token_hex(6))  # this run's part of every identity
    engine_tag: str | None = None  # tag each request for a vLLM running qdebug's plugin: qdebug_id "<tag>.<id>.<phase>"

    @property
    def name_tag(self) -> str:
        """The `<tag>` of every request's qdebug_id against vLLM: the engine tag when tracing, else this run's own."""
        return self.engine_tag or f"qdebug-replay-{self.run_id}"


@dataclass
class Answer:
    """One answer from the server (or why there is none)."""

    text: str | None = None
    error: str | None = None
    first_top: dict | None = None  # first generated token's top logprobs: token → logprob (finite ones only)
    bad_logprobs: list = field(default_factory=list)  # "'tok': NaN" for each non-finite logprob the server sent
    attempts: int = 1
    seconds: float = 0.0


@dataclass
class EndpointRun:
    """Raw results: each request's isolated answer and its answer in every burst."""

    endpoint: str
    model: str
    settings: EndpointSettings
    engine_caches: str = KEEP  # what this run did: FRESH, KEEP, COLD as asked of vLLM, or NOT_SENT (a server that is not vLLM)
    model_aliases: tuple = ()  # what /v1/models says `model` is besides its name: checkpoint, base model (model_aliases)
    references: dict = field(default_factory=dict)  # id → Answer (each request alone)
    bursts: list = field(default_factory=list)  # per repeat: id → Answer
    interrupted: bool = False
    client_cpu_s: float = 0.0  # the client's own CPU time over all requests sent
    sent: int = 0
    burst_seconds: list = field(default_factory=list)  # wall time of each burst
    warm: dict = field(default_factory=dict)  # id → Answer in the warm phase (production caching; {} when none ran)
    warm_seconds: float | None = None

    def fresh(self, phase: str) -> bool:
        """Whether `phase` was sent with fresh cache identities (uuid per media part, cache_salt)."""
        return self.engine_caches in (FRESH, COLD) and phase != WARM

    @property
    def warms(self) -> bool:
        """Whether this run has a warm phase: fresh cold phases against vLLM, then production caching."""
        return self.engine_caches == FRESH


def check_endpoint_settings(settings: EndpointSettings) -> tuple[str, str | None]:
    """(base URL ending in /v1, API key or None); refuses bad values before anything is sent."""
    parsed = urlparse(settings.url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InputError(f"--endpoint {settings.url}: expected an http(s) URL such as http://127.0.0.1:8000 or http://host:8000/v1")
    if settings.speed <= 0:
        raise InputError(f"--speed {settings.speed}: expected a positive factor (2 = twice as fast as captured)")
    if settings.repeat < 1:
        raise InputError(f"--repeat {settings.repeat}: expected at least 1")
    if settings.concurrency is not None and settings.concurrency < 1:
        raise InputError(f"--concurrency {settings.concurrency}: expected at least 1")
    if settings.timeout <= 0:
        raise InputError(f"--timeout {settings.timeout}: expected a positive number of seconds")
    if settings.engine_caches not in ENGINE_CACHES:
        raise InputError(f"--engine-caches {settings.engine_caches}: expected {', '.join(ENGINE_CACHES[:-1])} or {ENGINE_CACHES[-1]}")
    if not settings.max_answer_mb > 0:
        raise InputError(f"--max-answer-mb {settings.max_answer_mb}: expected a positive number of megabytes")
    base = settings.url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    key = None
    if settings.api_key_env is not None:
        key = os.environ.get(settings.api_key_env)
        if not key:
            raise InputError(f"--api-key-env {settings.api_key_env}: that environment variable is not set (expected it to hold the API key)")
    return base, key


def chat_body(request, model: str, top_logprobs: int) -> dict:
    """The chat-completions body for one captured Request: each media item as its own kind of part (the shared content
    codec, formats/content.py), greedy decoding. ContentError names an item that cannot be sent."""
    from .formats.content import encode_content

    body = {"model": model, "messages": [{"role": "user", "content": encode_content(request)}], "max_tokens": request.max_new_tokens,
            "temperature": 0, "stream": False}
    if top_logprobs:
        body.update(logprobs=True, top_logprobs=top_logprobs)
    return body


def isolated(body: dict, settings: EndpointSettings, request_id: str, phase: str, fresh: bool = True) -> dict:
    """The body with fresh engine-cache identities for this (run, phase, request) when `fresh` (a cold phase against
    vLLM: EndpointRun.fresh): a `uuid` per media part (vLLM's processor and encoder cache key) and a `cache_salt` (its
    prefix cache), so no run is served another's encodings or KV blocks; else the body as captured (production caching)."""
    if not fresh:
        return body
    import hashlib

    from .formats.content import MEDIA_KIND

    # vLLM takes a salt of at most 128 characters without '@', '/', '\' or NUL: the request id travels hashed.
    rid = hashlib.sha256(request_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    salt = f"qdebug-{settings.run_id}-{phase}-{rid}"
    messages = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = [{**part, "uuid": f"{salt}-{n}"} if part.get("type") in MEDIA_KIND else part for n, part in enumerate(content)]
        messages.append({**message, "content": content})
    return {**body, "messages": messages, "cache_salt": salt}


def engine_trace_id(tag: str, request_id: str, phase: str) -> str:
    """The qdebug_id a tagged request carries into the engine's trace folder; a capture's over-long request id is
    replaced by its hash, so the whole id stays within what the plugin takes (engine.request_names.MAX_ID)."""
    import hashlib

    from qdebug.engine.request_names import MAX_ID

    if len(tag) + len(request_id) + len(phase) + 2 > MAX_ID:
        request_id = "sha256-" + hashlib.sha256(request_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{tag}.{request_id}.{phase}"


def engine_tagged(body: dict, settings: EndpointSettings, request_id: str, phase: str, named: bool = False) -> dict:
    """The body, tagged for qdebug's vLLM plugin (`vllm_xargs`): traced and named when the run asks for engine traces;
    with `named` (a server that lists itself as vLLM) at least named `qdebug_id`, so the plugin's records (its batch
    log's encoder calls, steps and cache reads, the watch's findings) name it as this replay does."""
    if settings.engine_tag:
        return {**body, "vllm_xargs": {"qdebug_trace": True, "qdebug_id": engine_trace_id(settings.engine_tag, request_id, phase)}}
    if named:
        return {**body, "vllm_xargs": {"qdebug_id": engine_trace_id(settings.name_tag, request_id, phase)}}
    return body


def _redact(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def server_message(response) -> str:
    """The server's own error message from an OpenAI-style or FastAPI error body, else the body's start."""
    try:
        doc = response.json()
    except (ValueError, RecursionError):
        return response.text.strip().splitlines()[0][:200] if response.text.strip() else response.reason_phrase
    if isinstance(doc, dict):
        err = doc.get("error", doc.get("detail", doc.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    return str(doc)[:300]


def _parse_answer(doc: dict) -> Answer:
    choice = (doc.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content")
    if text is None:
        text = choice.get("text")
    first_top, bad = None, []
    content = ((choice.get("logprobs") or {}).get("content")) or []
    if content and content[0].get("top_logprobs"):
        first_top = {}
        for t in content[0]["top_logprobs"]:
            token, value = str(t["token"]), finite_number(t["logprob"])
            if value is not None:
                first_top[token] = value
            else:  # NaN, ±Infinity, a number no float holds, or not a number: kept out of the KL and the JSON, and reported
                bad.append(f"{token[:40]!r}: {_said_number(t['logprob'])}")
    return Answer(text="" if text is None else str(text), first_top=first_top or None, bad_logprobs=bad)


def finite_number(value: object) -> float | None:
    """A number a server sent as a finite float; None for NaN, ±Infinity, an integer no float holds (a 401-digit
    logprob), a bool or anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _said_number(value: object) -> str:
    """A bad number as a report names it: short, whatever its size (`1000…0 (401 digits)`)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 64:
        digits = str(abs(value)) if abs(value).bit_length() < 13_000 else ""
        return f"{'-' if value < 0 else ''}{digits[:4]}…{digits[-1:]} ({len(digits):,} digits)" if digits else "an integer of over 4,000 digits"
    return repr(value)[:40]


def _bodies(items: list, model: str, settings: EndpointSettings) -> dict:
    """Each request's body, or for one whose media item cannot travel as its own kind of part, the Answer saying so."""
    from .formats.content import ContentError

    bodies: dict = {}
    for r in items:
        try:
            bodies[r.request_id] = chat_body(r.request, model, settings.top_logprobs)
        except ContentError as exc:
            bodies[r.request_id] = Answer(error=f"not sent: {exc.reason}", attempts=0)
    return bodies


def _wire(body: "dict | Answer", run: "EndpointRun", request_id: str, phase: str) -> "dict | Answer":
    """What goes out for one request in one phase: its body with this phase's cache identities and engine tag."""
    if isinstance(body, Answer):
        return body
    return engine_tagged(isolated(body, run.settings, request_id, phase, run.fresh(phase)), run.settings, request_id, phase,
                         named=run.engine_caches != NOT_SENT)


async def _send(client, body: "dict | Answer", tag: str, settings: EndpointSettings, key: str | None) -> Answer:
    """POST one body with retries on connection resets and 5xx; the Answer names the cause of any failure."""
    import httpx

    if isinstance(body, Answer):  # a request that could not be encoded: its error, nothing sent
        return Answer(error=body.error, attempts=0)
    start = time.perf_counter()
    cause = "not sent"
    for attempt in range(1, settings.retries + 2):
        try:
            response = await fetch(client, "POST", "/chat/completions", settings, json=body, headers={"X-Qdebug-Request": tag})
        except (httpx.TimeoutException, TimeoutError):
            return Answer(error=f"timeout: no answer within {settings.timeout:g} s", attempts=attempt,
                          seconds=time.perf_counter() - start)
        except AnswerTooLarge as exc:  # retrying would fetch it again
            return Answer(error=too_large(settings, exc), attempts=attempt, seconds=time.perf_counter() - start)
        except (httpx.TransportError, OSError, httpx.DecodingError) as exc:
            cause = f"connection failed ({type(exc).__name__}: {_redact(str(exc), key) or 'reset'})"
        else:
            if response.status_code < 300:
                try:
                    answer = _parse_answer(response.json())
                except (ValueError, AttributeError, TypeError, KeyError, RecursionError) as exc:
                    return Answer(error=f"unreadable answer ({type(exc).__name__})", attempts=attempt, seconds=time.perf_counter() - start)
                answer.attempts, answer.seconds = attempt, time.perf_counter() - start
                return answer
            message = _redact(server_message(response), key)
            if response.status_code < 500:  # the server refused this request: retrying will not change its mind
                return Answer(error=f"HTTP {response.status_code}: {message}", attempts=attempt, seconds=time.perf_counter() - start)
            cause = f"server error HTTP {response.status_code}: {message}"
        if attempt <= settings.retries:
            await asyncio.sleep(settings.backoff * 2 ** (attempt - 1))
    return Answer(error=f"{cause} (after {settings.retries + 1} attempts)", attempts=settings.retries + 1, seconds=time.perf_counter() - start)


async def _probe_model(client, settings: EndpointSettings, base: str, key: str | None) -> tuple[str, tuple[str, ...], str | None]:
    """The served model's name (--served-model, else the first entry of /v1/models), what else it is listed as, and
    who the listing says it is `owned_by` (vLLM says "vllm")."""
    import httpx

    try:
        response = await fetch(client, "GET", "/models", settings)
    except (httpx.TimeoutException, TimeoutError):
        raise EndpointError(f"{base}: no complete answer to GET /models within {settings.timeout:g} s (--timeout)") from None
    except AnswerTooLarge as exc:
        raise EndpointError(f"{base}/models: {too_large(settings, exc)}") from None
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise UnreachableError(f"cannot reach {base} ({type(exc).__name__}: {_redact(str(exc), key) or 'connection failed'}); is the server running?") from None
    except (httpx.TransportError, OSError, httpx.DecodingError) as exc:
        raise EndpointError(f"{base}/models failed ({type(exc).__name__}: {_redact(str(exc), key) or 'no answer'}); is it an OpenAI-compatible server?") from None
    if response.status_code in (401, 403):
        raise EndpointError(f"{base} refused the request (HTTP {response.status_code}: {_redact(server_message(response), key)}); check --api-key-env")
    if settings.served_model:
        return settings.served_model, model_aliases(response, settings.served_model), model_owner(response, settings.served_model)
    if response.status_code != 200:
        raise EndpointError(f"{base}/models answered HTTP {response.status_code} ({_redact(server_message(response), key)}); name the model with --served-model")
    try:
        name = str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise EndpointError(f"{base}/models lists no model; name it with --served-model") from None
    return name, model_aliases(response, name), model_owner(response, name)


def _model_entry(response, name: str) -> dict:
    """Model `name`'s entry in a /v1/models answer ({} when it has none or is not one)."""
    try:
        entries = response.json()["data"] if response.status_code == 200 else []
        return next((e for e in entries if isinstance(e, dict) and e.get("id") == name), {})
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}


def model_owner(response, name: str) -> str | None:
    """The `owned_by` of model `name`'s /v1/models entry (None when the answer does not say)."""
    owner = _model_entry(response, name).get("owned_by")
    return owner if isinstance(owner, str) else None


def model_aliases(response, name: str) -> tuple[str, ...]:
    """What else the server says model `name` is, from its /v1/models entry as vLLM lists it: the checkpoint
    (`root`) and, for an adapter, the base model (`parent`); () when the answer does not say."""
    entry = _model_entry(response, name)
    return tuple(v for v in (entry.get("root"), entry.get("parent")) if isinstance(v, str) and v)


def run_endpoint(
    batch: Batch,
    settings: EndpointSettings,
    on_progress: Callable[[str, str, bool], None] | None = None,
) -> EndpointRun:
    """Each request alone (sequentially), then the burst `repeat` times, then the warm phase when the run has one
    (EndpointRun.warms); Ctrl-C keeps what finished."""
    base, key = check_endpoint_settings(settings)
    run = EndpointRun(base, settings.served_model or "", settings)
    try:
        asyncio.run(_run(batch, settings, base, key, run, on_progress or (lambda phase, rid, ok: None)))
    except KeyboardInterrupt:
        run.interrupted = True
    return run


async def _run(batch: Batch, settings: EndpointSettings, base: str, key: str | None, run: EndpointRun, progress) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=settings.concurrency or 64)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=settings.timeout, limits=limits, follow_redirects=False) as client:
        run.model, run.model_aliases, owner = await _probe_model(client, settings, base, key)
        # uuid and cache_salt are vLLM's; other servers may refuse them (transformers serve answers 422), so they go
        # only to a server that lists itself as vLLM; another server's caches are not the client's to control.
        run.engine_caches = settings.engine_caches if owner == VLLM_OWNER else NOT_SENT
        items = [r for r in batch.requests if r.request is not None]
        cpu0 = time.process_time()
        bodies = _bodies(items, run.model, settings)
        for r in items:  # the isolated reference: one request at a time, nothing else in flight
            answer = await _send(client, _wire(bodies[r.request_id], run, r.request_id, REFERENCE),
                                 f"{r.request_id}/{REFERENCE}", settings, key)
            run.references[r.request_id] = answer
            run.sent += 1
            progress(REFERENCE, r.request_id, answer.error is None)
        if items and all(a.error and a.error.startswith("HTTP 4") for a in run.references.values()):
            raise EndpointError(f"{base} refused every request: {next(iter(run.references.values())).error}")
        for k in range(settings.repeat):
            burst: dict = {}
            run.bursts.append(burst)
            started = time.perf_counter()
            await _burst(client, items, bodies, run, key, burst, f"burst-{k + 1}", progress)
            run.burst_seconds.append(time.perf_counter() - started)
            run.sent += len(items)
        if run.warms:  # after the cold phases: the capture as production runs it, caches and all
            started = time.perf_counter()
            await _burst(client, items, bodies, run, key, run.warm, WARM, progress)
            run.warm_seconds = time.perf_counter() - started
            run.sent += len(items)
        run.client_cpu_s = time.process_time() - cpu0


async def _burst(client, items, bodies, run: EndpointRun, key, burst: dict, phase: str, progress) -> None:
    """Send every request of one phase as captured, in capture order: at its arrival offset (divided by --speed), or N at
    a time."""
    settings = run.settings
    gate = asyncio.Semaphore(settings.concurrency or 64)
    stamps = [r.arrival_ts for r in items if r.arrival_ts is not None]
    t0 = min(stamps) if stamps else 0.0
    start = time.perf_counter()

    async def one(r) -> None:
        if settings.concurrency is None and r.arrival_ts is not None:
            delay = (r.arrival_ts - t0) / settings.speed - (time.perf_counter() - start)
            if delay > 0:
                await asyncio.sleep(delay)
        async with gate:
            answer = await _send(client, _wire(bodies[r.request_id], run, r.request_id, phase), f"{r.request_id}/{phase}", settings, key)
        burst[r.request_id] = answer
        progress("burst", r.request_id, answer.error is None)

    await asyncio.gather(*(one(r) for r in items))
