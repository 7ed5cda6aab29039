"""The batch log of qdebug's vLLM plugin (`batches.jsonl` in the trace folder): which (request, item) pairs each encoder
call carried, in order, and which requests shared each model-runner step, for every request the engine ran.

Written by `batch_record.BatchRecorder` inside the worker; read here (stdlib only) by whoever judges a replay. A
finished request's cache reads (engine/cache_reads.py: which positions or items a cache served it, from whom, and
whether the content was its own) are a `cache_reads` line. A
request is named by the client's `vllm_xargs.qdebug_id` (replay's `engine_trace_id`), else by vLLM's request id; an
item is the index of the media item in the request's multimodal items in prompt order (vLLM's `mm_features`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from .cache_reads import MAX_READS, CacheRead

BATCH_LOG = "batches.jsonl"
BATCH_LOG_OLD = "batches.1.jsonl"  # the previous generation, once the log passed its size bound
ENCODER_CALL = "encoder_call"
BATCH_STEP = "batch_step"
CACHE_READS = "cache_reads"  # one finished request's cache reads (engine/cache_reads.CacheRead), every cache's


@dataclass(frozen=True)
class EncoderCall:
    """One call of the model's encoder: the (request, item) pairs it carried, in the order of its batched input."""

    worker: int
    call: int
    step: int
    modality: str
    items: list[tuple[str, int]]

    @property
    def names(self) -> list[str]:
        """The requests whose items the call carried, each once, in order."""
        return list(dict.fromkeys(name for name, _ in self.items))

    def carries(self, name: str) -> bool:
        """Whether the call encoded an item of request `name`."""
        return any(n == name for n, _ in self.items)


@dataclass(frozen=True)
class BatchStep:
    """One model-runner step: the requests that computed prompt rows in it (`prefill`) and those that sampled a token."""

    worker: int
    step: int
    prefill: list[str]
    decode: list[str]

    @property
    def names(self) -> list[str]:
        """Every request of the step, prefill first."""
        return [*self.prefill, *self.decode]

    def carries(self, name: str) -> bool:
        """Whether request `name` ran in this step."""
        return name in self.prefill or name in self.decode


@dataclass
class SharedBatches:
    """The encoder calls and steps that carried at least one of a set of requests."""

    encoder_calls: list[EncoderCall] = field(default_factory=list)
    steps: list[BatchStep] = field(default_factory=list)

    def described(self) -> str:
        """In words: "3 encoder calls of 4, 3, 1 items; 2 steps with 8 requests" (step sizes listed when they differ)."""
        calls = ", ".join(str(len(c.items)) for c in self.encoder_calls)
        sizes = [len(s.names) for s in self.steps]
        most = max(sizes, default=0)
        said = f"{len(self.encoder_calls)} encoder call{'s' * (len(self.encoder_calls) != 1)}"
        said += f" of {calls} item{'s' * (calls != '1')}" if calls else ""
        steps = f"{len(sizes)} step{'s' * (len(sizes) != 1)}"
        return f"{said}; {steps}" + (f" with up to {most} requests" if sizes else "")


@dataclass
class BatchLog:
    """Every record of a batch log, in the order written."""

    encoder_calls: list[EncoderCall] = field(default_factory=list)
    steps: list[BatchStep] = field(default_factory=list)
    cache_reads: dict[str, list[CacheRead]] = field(default_factory=dict)  # request name → what caches served it

    def shared(self, names: Iterable[str]) -> SharedBatches:
        """The encoder calls and steps in which at least one of `names` ran (each whole: every request it carried)."""
        wanted = set(names)
        return SharedBatches([c for c in self.encoder_calls if wanted.intersection(n for n, _ in c.items)],
                             [s for s in self.steps if wanted.intersection(s.prefill) or wanted.intersection(s.decode)])

    def calls_of(self, name: str) -> list[EncoderCall]:
        """The encoder calls that encoded an item of request `name`."""
        return [c for c in self.encoder_calls if c.carries(name)]

    def partners(self, name: str) -> dict[str, set[str]]:
        """The other requests `name` shared an encoder call with (ENCODER_CALL) and a step with (BATCH_STEP)."""
        calls = {n for c in self.calls_of(name) for n in c.names} - {name}
        steps = {n for s in self.steps if s.carries(name) for n in s.names} - {name}
        return {ENCODER_CALL: calls, BATCH_STEP: steps}


def parse_batch_log(lines: Iterable[str]) -> BatchLog:
    """A BatchLog from the log's lines (a file's, or fetched over HTTP); a line that is not a whole record is skipped."""
    log = BatchLog()
    for raw in lines:
        try:
            doc = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            continue
        if not isinstance(doc, dict):
            continue
        try:
            if doc.get("record") == ENCODER_CALL:
                items = [(str(n), int(i)) for n, i in doc["items"]]
                log.encoder_calls.append(EncoderCall(int(doc["worker"]), int(doc["call"]), int(doc["step"]), str(doc["modality"]), items))
            elif doc.get("record") == BATCH_STEP:
                log.steps.append(BatchStep(int(doc["worker"]), int(doc["step"]), [str(n) for n in doc["prefill"]],
                                           [str(n) for n in doc["decode"]]))
            elif doc.get("record") == CACHE_READS:
                log.cache_reads[str(doc["request"])] = [CacheRead.from_json(r) for r in doc["reads"][:MAX_READS]]
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return log


def read_batch_log(folder: str | os.PathLike) -> BatchLog:
    """The batch log of a trace folder: its older generation, then the current one (empty when there is none). Only
    files of the folder itself are read (a link is refused, as for the index)."""
    from .trace_dir import open_own

    lines: list[str] = []
    for name in (BATCH_LOG_OLD, BATCH_LOG):
        try:
            fd = open_own(folder, name)
        except OSError:
            continue
        with open(fd, encoding="utf-8", errors="replace", closefd=True) as f:
            lines += f.readlines()
    return parse_batch_log(lines)
