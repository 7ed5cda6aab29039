"""`replay --endpoint URL --engine-traces DIR`: gather what the engine recorded of the run (each request's trace alone and
in every burst, the plugin's batch records) and judge it three ways (analysis.engine_verdicts)."""

from __future__ import annotations

import time
from pathlib import Path

from qdebug.vocab import FindingKind, Severity

REFERENCE = "reference"  # the phase of the isolated run (replay.endpoint's phase names)


def engine_evidence(report, run, folder: Path, settings, local_traces: dict) -> None:
    """Read the engine's traces and batch records of `run`, set the verdicts they decide and add their findings."""
    from qdebug.analysis.engine_evidence import engine_findings, engine_rows
    from qdebug.analysis.engine_verdicts import EngineRuns, apply_engine_comparison
    from qdebug.findings import Finding

    phases = [REFERENCE, *(f"burst-{k + 1}" for k in range(len(run.bursts)))]
    answered = [run.references, *run.bursts]
    deadline = time.monotonic() + settings.timeout  # one bound for them all: a server that traces nothing costs one --timeout
    read: list[dict] = []
    missing: list[str] = []
    unreadable: list[tuple[str, str, str]] = []  # (request, trace tag, why)
    for phase, answers in zip(phases, answered):
        read.append(_phase_traces(folder, run, settings, phase, answers, deadline, missing, unreadable))
    # the burst traces against the answers' donors (engine_contamination, engine_disagreement), before the verdicts move
    found = engine_findings(report, read[1:], [m for m in missing if not m.endswith(f".{REFERENCE}")], unreadable)
    runs = EngineRuns(alone=read[0], bursts=read[1:], local=local_traces, rows=[engine_rows(t) for t in read[1:]])
    said = _batching(folder, settings.engine_tag, phases, read, runs)
    found += apply_engine_comparison(report, runs)
    for k, b in enumerate(said[1:], start=1):
        if b.batched:
            found.append(Finding(FindingKind.ENGINE_BATCHING, Severity.INFO, f"burst {k}: {b.said} (from the {b.source})"))
        else:
            found.append(Finding(FindingKind.BURST_NOT_BATCHED, Severity.WARNING,
                                 f"burst {k} never batched: {b.said} (from the {b.source}); no request of it shared an encoder call or a "
                                 "step, so it tested nothing a batch could break (send more at a time: --concurrency)"))
    if said and said[0].batched:
        found.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.WARNING,
                             f"the isolated runs were not alone inside the engine ({said[0].said}): another client's requests shared them"))
    expected = sum(1 for answers in answered for a in answers.values() if a.error is None)
    got = sum(len(t) for t in read)
    report.extra["engine_traces"] = {
        "folder": str(folder), "tag": settings.engine_tag, "read": got, "expected": expected, "alone": len(read[0]), "bursts": [len(t) for t in read[1:]],
        "local_references": len(local_traces), "batching": [b.to_json() for b in said[1:]],
        "said": f"engine traces: read {got} of {expected} ({len(read[0])} alone, {got - len(read[0])} in {len(read) - 1} burst(s))"
                + ("; compared stage by stage with the local model's" if local_traces else ""),
    }
    report.findings += found


def _phase_traces(folder: Path, run, settings, phase: str, answers: dict, deadline: float, missing: list, unreadable: list) -> dict:
    """request id → the engine's trace of its run in `phase`, for every request the server answered."""
    from qdebug.commands.engine_diff import TraceMissing, await_trace, check_engine_model
    from qdebug.errors import EngineTraceError, InputError
    from qdebug.replay.endpoint import engine_trace_id

    traces = {}
    for rid, answer in answers.items():
        if answer.error is not None:
            continue
        tag = engine_trace_id(settings.engine_tag, rid, phase)
        try:
            trace = await_trace(folder, tag, max(0.5, deadline - time.monotonic()))
        except TraceMissing:
            missing.append(tag)
            continue
        except (EngineTraceError, InputError, OSError) as exc:  # corrupt, truncated, or not a file of the folder
            unreadable.append((rid, tag, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"))
            continue
        check_engine_model(trace, run.model, run.model_aliases, tag)
        traces[rid] = trace
    return traces


def _batching(folder: Path, tag: str, phases: list[str], read: list[dict], runs) -> list:
    """How each phase was batched (its BurstBatching), and each run's partners into `runs.batching`: from the plugin's
    batch records when the folder holds them, else from the traces' own steps."""
    from qdebug.analysis.engine_batching import describe_from_records, describe_from_traces, from_records, from_trace
    from qdebug.engine.batch_log import read_batch_log
    from qdebug.replay.endpoint import engine_trace_id

    log = read_batch_log(folder)
    said = []
    for k, (phase, traces) in enumerate(zip(phases, read)):
        names = {engine_trace_id(tag, rid, phase): rid for rid in traces}
        if log.shared(set(names)).steps:
            for name, rid in names.items():
                runs.batching[(rid, k)] = from_records(log, name, tag, phase)
            said.append(describe_from_records(log, set(names)))
            continue
        by_engine_id = {str(engine["request_id"]): rid for rid, t in traces.items() if "request_id" in (engine := t.meta.engine or {})}
        for rid, trace in traces.items():
            runs.batching[(rid, k)] = from_trace(trace, by_engine_id)
        said.append(describe_from_traces(list(traces.values())))
    return said
