"""`qdebug watch URL`'s reader of a server's /metrics: one GET whose whole answer must arrive within `--timeout` and
stay within `--max-mb` once decompressed (the bounded fetch of `replay --endpoint`), then its `qdebug_watch_*` samples,
each a finite count or a one-line error naming it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from qdebug.errors import InputError, UnreachableError
from qdebug.shown import shown
from qdebug.vocab import WATCH_CHECKS

from .watch_folder import CHECK_EVERY, Deadline

SERIES = {"qdebug_watch_checks_total": "checks", "qdebug_watch_violations_total": "violations",
          "qdebug_watch_errors_total": "errors", "qdebug_watch_check_seconds_total": "seconds"}
WORKER = {"qdebug_watch_worker_steps_total": "steps", "qdebug_watch_worker_step_seconds_total": "step_seconds",
          "qdebug_watch_plugin_seconds_total": "plugin_seconds"}  # the plugin's clock (engine/plugin_clock.py)
UP = "qdebug_watch_up"  # 0: the plugin says its watch is not running
READS = "qdebug_watch_cache_reads_total"  # the cache check's reads, by `cache` and `reuse` (known words only are kept)
MAX_CHECKS = 64  # distinct `check` labels a reading may hold (the plugin has seven)
_LINE = re.compile(r"^(qdebug_watch_\w{0,200})(\{[^\n]{0,4096}\})?[ \t]+(\S+)(?:[ \t]+-?\d{1,20})?[ \t]*\r?$", re.M)
_CHECK = re.compile(r'(?:^|[{,])\s*check="((?:[^"\\\n]|\\.){1,256})"')
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass
class Scraped:
    """What one /metrics answer says: series → check → value, and the worker clock's series."""

    counters: dict[str, dict[str, float]] = field(default_factory=dict)
    worker: dict[str, float] = field(default_factory=dict)
    reads: dict[str, float] = field(default_factory=dict)  # "cache/reuse" → reads


def metrics_url(source: str) -> str:
    """The /metrics URL of a server URL (given with or without /metrics)."""
    base = source.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


def check_url(source: str) -> None:
    """A one-line InputError for a URL that names no server (`http://[::1`, no host, a port out of range)."""
    try:
        parts = urlsplit(source)
        port = parts.port
    except ValueError as exc:
        raise InputError(f"URL_OR_DIR {shown(source, 200)!r}: not a URL ({exc}) (expected http://HOST:PORT)") from None
    if not parts.hostname or port == 0:
        raise InputError(f"URL_OR_DIR {shown(source, 200)!r}: names no server (expected http://HOST:PORT)")


def scrape(source: str, deadline: Deadline, max_mb: float) -> Scraped:
    """The qdebug_watch_* samples of a server's /metrics, fetched and read before `deadline`, within `max_mb` MiB."""
    import asyncio

    import httpx

    from qdebug.replay.endpoint import AnswerTooLarge

    target = metrics_url(source)
    shown_target = shown(target, 200)
    try:
        body = asyncio.run(_get(target, deadline.left(), max_mb))
    except TimeoutError:
        raise UnreachableError(f"{shown_target}: no complete answer within {deadline.seconds:g} s (--timeout); is the server "
                               "overloaded or not an HTTP server?") from None
    except AnswerTooLarge as exc:
        raise UnreachableError(f"{shown_target}: answer too large: {exc} (the limit is --max-mb {max_mb:g}; a vLLM's "
                               "/metrics is far smaller)") from None
    except httpx.InvalidURL as exc:
        raise InputError(f"URL_OR_DIR {shown_target}: not a URL ({shown(exc, 200)}) (expected http://HOST:PORT)") from None
    except httpx.HTTPError as exc:
        raise UnreachableError(f"cannot reach {shown_target} ({type(exc).__name__}); is the vLLM server running?") from None
    if body.status_code != 200:
        raise InputError(f"{shown_target} answered HTTP {body.status_code} (expected 200 and Prometheus text)")
    return parse_metrics(body.text, shown_target, deadline)


async def _get(target: str, timeout: float, max_mb: float):
    """The whole answer to GET `target`, bounded as `replay --endpoint` bounds an answer (replay/endpoint.py fetch)."""
    import httpx

    from qdebug.replay.endpoint import EndpointSettings, fetch

    settings = EndpointSettings(url=target, timeout=timeout, max_answer_mb=max_mb)
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
        return await fetch(client, "GET", target, settings)


def parse_metrics(text: str, target: str, deadline: Deadline) -> Scraped:
    """The watch's samples in Prometheus text: a value that is not a finite count ≥ 0 is a one-line InputError, as
    is `qdebug_watch_up 0` (a watch that is not running) or no watch series at all."""
    out = Scraped()
    up: float | None = None
    seen: set[str] = set()
    for number, match in enumerate(_LINE.finditer(text)):
        if number % CHECK_EVERY == 0:
            deadline.check(target, "a /metrics answer read within --timeout")
        name, labels, raw = match.groups()
        if name == READS:
            kind = read_kind(labels or "")
            if kind is not None:
                out.reads[kind] = out.reads.get(kind, 0.0) + _count(raw, target, f"{name}{labels}")
            continue
        if name not in SERIES and name not in WORKER and name != UP:
            continue
        label = _check_label(labels or "")
        sample = f"{name}{{check={label!r}}}" if label is not None else name
        if name == UP:
            value = _count(raw, target, sample)
            up = value if up is None else min(up, value)
        elif name in WORKER:
            out.worker[WORKER[name]] = out.worker.get(WORKER[name], 0.0) + _count(raw, target, sample)
        elif label is not None:  # a series of ours without a check label names no row: neither counted nor shown
            value = _count(raw, target, sample)
            row = out.counters.setdefault(SERIES[name], {})
            row[label] = row.get(label, 0.0) + value
            seen.add(label)
            if len(seen) > MAX_CHECKS:
                raise InputError(f"{target}: more than {MAX_CHECKS} check labels on qdebug_watch_* series (expected the "
                                 f"plugin's checks: {', '.join(WATCH_CHECKS)})")
    if up == 0:
        raise InputError(f"{target}: qdebug_watch_up is 0: the watch is not running on this server (expected a vLLM whose "
                         "log says qdebug's watch is on; its log says why it did not start)")
    if not out.counters:
        raise InputError(f"{target} exports no qdebug_watch_* series: the watch is not running there (expected a vLLM "
                         "started with QDEBUG_VLLM_WATCH=1 and qdebug's plugin installed)")
    return out


def read_kind(labels: str) -> str | None:
    """`cache/reuse` of a cache-reads sample's labels, when both are words the plugin writes (else None: not shown)."""
    from qdebug.vocab import CacheKind, CacheReuse

    found = dict(re.findall(r'(cache|reuse)="([a-z_]{1,32})"', labels))
    cache, reuse = found.get("cache", ""), found.get("reuse", "")
    known = cache in {c.value for c in CacheKind} and reuse in {r.value for r in CacheReuse}
    return f"{cache}/{reuse}" if known else None


def _check_label(labels: str) -> str | None:
    """The `check` label's value (Prometheus escapes undone), or None."""
    found = _CHECK.search(labels)
    if found is None:
        return None
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), found.group(1))


def _count(raw: str, target: str, sample: str) -> float:
    """A sample's value as a finite number ≥ 0, else a one-line InputError naming the sample (shown safely)."""
    if _NUMBER.fullmatch(raw):
        value = float(raw)  # 1e400 is inf: refused below
        if math.isfinite(value) and value >= 0:
            return value
    raise InputError(f"{target}: {shown(sample, 300)} is {shown(raw, 40)!r}, not a finite count (expected a number "
                     "≥ 0: the plugin never exports NaN, Inf or negative counts)")
