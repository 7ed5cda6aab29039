"""The watch mode's settings, read from the server's environment (every process of vLLM reads the same ones).

- `QDEBUG_VLLM_WATCH=1` turns the watch on (the cheap checks run on every request); `true`, `yes`, `on`, `enable`,
  `enabled` do too, `0`, `false`, `no`, `off`, `disable`, `disabled` or unset leave it off, any other value is said in
  the log (naming the variable, the value and the words accepted) and leaves it off;
- `QDEBUG_VLLM_WATCH_SAMPLE=F` (0..1, default 0.01): the share of steps and encoder calls the sampled checks take;
- `QDEBUG_VLLM_WATCH_DIR=DIR`: the findings log, the counters the front end serves on /metrics, flight-recorder traces
  (unset: a folder the front end makes under the temporary directory, named in its log);
- `QDEBUG_VLLM_WATCH_LOG_MB=N` (default 16): the findings log's size before it is rotated (one old file is kept);
- `QDEBUG_VLLM_WATCH_RAISE=CHECK[,CHECK]`: those checks raise on every run (proves on a deployment that a failing check
  is counted and logged and the request is answered unchanged).
A bad value is logged naming the variable and the default is used: the server keeps serving.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from qdebug.vocab import WATCH_CHECKS

ENV_WATCH = "QDEBUG_VLLM_WATCH"
ENV_SAMPLE = "QDEBUG_VLLM_WATCH_SAMPLE"
ENV_DIR = "QDEBUG_VLLM_WATCH_DIR"
ENV_LOG_MB = "QDEBUG_VLLM_WATCH_LOG_MB"
ENV_RAISE = "QDEBUG_VLLM_WATCH_RAISE"
ENV_RUN = "QDEBUG_VLLM_WATCH_RUN"  # set by the first process (the front end) for its children: whose counters it serves
DEFAULT_SAMPLE = 0.01
DEFAULT_LOG_MB = 16

log = logging.getLogger("vllm.qdebug")


ON = ("1", "true", "yes", "on", "enable", "enabled")
OFF = ("", "0", "false", "no", "off", "disable", "disabled")
_SAID: set[str] = set()  # unknown QDEBUG_VLLM_WATCH values already said in this process


def watch_on() -> bool:
    """Whether the server's environment turns the watch on; an unknown value is said once (per process) and is off."""
    raw = os.environ.get(ENV_WATCH, "")
    word = raw.strip().lower()
    if word in ON:
        return True
    if word not in OFF and raw not in _SAID:
        _SAID.add(raw)
        log.error("qdebug: %s=%r: expected one of %s to turn the watch on (or %s to leave it off); the watch is off",
                  ENV_WATCH, raw[:40], ", ".join(ON), ", ".join(o for o in OFF if o))
    return False


@dataclass(frozen=True)
class WatchSettings:
    """The watch's settings, checked: sample share, folder, log bound, the checks told to raise."""

    sample: float
    folder: str
    log_bytes: int
    raising: frozenset[str]
    run: str


def read_settings() -> WatchSettings:
    """The settings from the environment; each bad value logged (naming the variable) and replaced by its default."""
    return WatchSettings(sample=_sample(), folder=os.environ.get(ENV_DIR, ""), log_bytes=_log_mb() << 20,
                         raising=_raising(), run=os.environ.get(ENV_RUN, ""))


def _sample() -> float:
    raw = os.environ.get(ENV_SAMPLE, "").strip()
    if not raw:
        return DEFAULT_SAMPLE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # NaN fails both comparisons too
        log.error("qdebug: %s=%r: expected a share from 0 to 1 (e.g. 0.01); sampling %s", ENV_SAMPLE, raw[:40], DEFAULT_SAMPLE)
        return DEFAULT_SAMPLE
    return value


def _log_mb() -> int:
    raw = os.environ.get(ENV_LOG_MB, "").strip()
    if not raw:
        return DEFAULT_LOG_MB
    if raw.isascii() and raw.isdigit() and 0 < int(raw) <= 1 << 20:
        return int(raw)
    log.error("qdebug: %s=%r: expected a whole number of MiB of at least 1; using %d", ENV_LOG_MB, raw[:40], DEFAULT_LOG_MB)
    return DEFAULT_LOG_MB


def _raising() -> frozenset[str]:
    raw = os.environ.get(ENV_RAISE, "").strip()
    names = {n.strip() for n in raw.split(",") if n.strip()}
    unknown = sorted(n for n in names if n not in WATCH_CHECKS)
    if unknown:
        log.error("qdebug: %s names %s: expected checks from %s", ENV_RAISE, ", ".join(unknown)[:200], ", ".join(WATCH_CHECKS))
    return frozenset(names - set(unknown))
