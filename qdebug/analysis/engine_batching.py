"""How the engine really batched an endpoint replay's runs, from the plugin's batch records (`batches.jsonl`, read by
`engine.batch_log`) or, for a server without them, from each engine trace's own steps: who shared each request's
encoder calls and steps, whether a burst batched at all, and each run's batch composition (what "the same batch,
repeated" means for nondeterminism)."""

from __future__ import annotations

from dataclasses import dataclass, field

ENCODER_CALL, BATCH_STEP = "encoder_call", "batch_step"  # the two kinds of partners (batch_log.partners' keys)


@dataclass
class RunBatching:
    """Who shared one run (a request in one phase) of the engine: request ids (the capture's), not the engine's names."""

    encoder_call: list[str] = field(default_factory=list)  # requests whose items were encoded in a call with its items
    batch_step: list[str] = field(default_factory=list)  # requests that ran in a step with it (prefill or decode)
    composition: tuple = ()  # what it ran with, call by call and step by step: equal only for the same batch, repeated

    @property
    def alone(self) -> bool:
        """Whether nothing shared its encoder calls or steps."""
        return not self.encoder_call and not self.batch_step


@dataclass
class BurstBatching:
    """How one phase (a burst, or the isolated references) was batched, in words and figures."""

    said: str  # e.g. "3 encoder calls of 4, 3, 1 items; 2 steps with 8 requests"
    batched: bool  # two requests of it shared an encoder call or a step
    encoder_calls: list[int] = field(default_factory=list)  # items per encoder call
    largest_step: int = 0  # requests in its most shared step
    source: str = "batch records"  # or "engine traces" (a plugin without batch records: steps only)

    def to_json(self) -> dict:
        """As `engine.bursts[k]` of the report's JSON."""
        return {"said": self.said, "batched": self.batched, "encoder_calls": self.encoder_calls,
                "largest_step": self.largest_step, "source": self.source}


def request_of(name: str, tag: str, phase: str) -> str | None:
    """The capture's request id in an engine name `<tag>.<request id>.<phase>` of this run and phase (None: another's)."""
    head, tail = f"{tag}.", f".{phase}"
    return name[len(head):-len(tail)] if name.startswith(head) and name.endswith(tail) else None


def _ids(names, tag: str, phase: str) -> list[str]:
    """The request ids of this run and phase among engine names, in order, once each; others' names as they are."""
    out: list[str] = []
    for n in names:
        rid = request_of(n, tag, phase) or n
        if rid not in out:
            out.append(rid)
    return out


def from_records(log, name: str, tag: str, phase: str) -> RunBatching:
    """One run's partners and composition from the plugin's batch records (`engine.batch_log.BatchLog`)."""
    me = request_of(name, tag, phase)
    calls, steps = log.calls_of(name), log.shared({name}).steps
    encoder = [r for r in _ids((n for c in calls for n in c.names), tag, phase) if r != me]
    step = [r for r in _ids((n for s in steps for n in s.names), tag, phase) if r != me]
    composition = (tuple(tuple((request_of(n, tag, phase) or n, i) for n, i in c.items) for c in calls),
                   tuple(tuple(sorted(_ids(s.names, tag, phase))) for s in steps))
    return RunBatching(encoder, step, composition)


def from_trace(trace, by_engine_id: dict[str, str]) -> RunBatching:
    """One run's step partners from its engine trace alone (a plugin without batch records): `co_scheduled` holds the
    engine's request ids, named through `by_engine_id` (engine id → request id, from the other traces of the phase)."""
    engine = trace.meta.engine or {}
    others = sorted(by_engine_id.get(r, r) for r in engine.get("co_scheduled") or [])
    steps = tuple((b.get("requests"), b.get("tokens")) for b in engine.get("batches") or [] if isinstance(b, dict))
    return RunBatching([], others, ((), (tuple(others), steps)))


def describe_from_records(log, names: set[str]) -> BurstBatching:
    """A phase's batching from the batch records of its runs (`names`: their engine names)."""
    shared = log.shared(names)
    calls = [sum(1 for n, _ in c.items if n in names) for c in shared.encoder_calls]
    steps = [sum(1 for n in s.names if n in names) for s in shared.steps]
    batched = any(len([n for n in c.names if n in names]) > 1 for c in shared.encoder_calls) or any(n > 1 for n in steps)
    return BurstBatching(shared.described(), batched, calls, max(steps, default=0))


def describe_from_traces(traces: list) -> BurstBatching:
    """A phase's batching from its engine traces' own steps (no encoder calls: the plugin kept no batch records)."""
    largest = max((int(b.get("requests") or 0) for t in traces for b in (t.meta.engine or {}).get("batches") or []
                   if isinstance(b, dict)), default=0)
    shared = sum(1 for t in traces if (t.meta.engine or {}).get("co_scheduled"))
    said = (f"{shared} of {len(traces)} traced requests shared a step with another (largest step: {largest} requests); "
            "encoder calls not recorded by this plugin")
    return BurstBatching(said, largest > 1, [], largest, source="engine traces")
