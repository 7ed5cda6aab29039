"""`replay --endpoint URL --engine-traces DIR`: gather what the engine recorded of the run (each request's trace alone and
in every burst, the plugin's batch records) and judge it three ways (analysis.engine_verdicts)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from qdebug.vocab import FindingKind, Severity


def engine_evidence(report, run, folder: Path, settings, local_traces: dict) -> dict[str, str]:
    """Read the engine's traces and batch records of `run`, set the verdicts they decide and add their findings; the
    warm phase's runs, when it ran, are judged as burst runs are (analysis.warm.warm_traces). Returns, for each warm run
    judged from its trace, where it parts from its run alone ("" where it does not)."""
    from qdebug.analysis.engine_evidence import engine_findings, engine_rows, no_evidence_findings
    from qdebug.analysis.engine_verdicts import EngineRuns, apply_engine_comparison
    from qdebug.analysis.warm import warm_traces
    from qdebug.findings import Finding
    from qdebug.replay.endpoint_phases import phase_names

    phases = phase_names(run)
    nb = len(run.bursts)
    answered = [run.references, *run.bursts, *((run.warm,) if len(phases) > nb + 1 else ())]
    deadline = time.monotonic() + settings.timeout  # one bound for them all: a server that traces nothing costs one --timeout
    read: list[dict] = []
    lost = Lost()
    for phase, answers in zip(phases, answered):
        read.append(_phase_traces(folder, run, settings, phase, answers, deadline, lost))
    expected = sum(1 for answers in answered for a in answers.values() if a.error is None)
    got = sum(len(t) for t in read)
    # the burst traces against the answers' donors (engine_contamination, engine_disagreement), before the verdicts move
    found = engine_findings(report, read[1:nb + 1])
    found += no_evidence_findings(lost.missing, lost.unreadable, lost.non_finite)
    runs = EngineRuns(alone=read[0], bursts=read[1:nb + 1], local=local_traces, rows=[engine_rows(t) for t in read[1:nb + 1]])
    said = _batching(folder, settings.engine_tag, phases, read, runs, answered)
    found += apply_engine_comparison(report, runs)
    warm = read[nb + 1] if len(read) > nb + 1 else {}
    where = warm_traces(report, runs, warm, {rid: b for (rid, k), b in runs.batching.items() if k == nb + 1}) if warm else {}
    for k, b in enumerate(said[1:nb + 1], start=1):
        if b is None:  # traces of this burst are missing and no batch record says how it ran: nothing to tell
            continue
        if b.batched:
            found.append(Finding(FindingKind.ENGINE_BATCHING, Severity.INFO, f"burst {k}: {b.said} (from the {b.source})"))
        else:
            found.append(Finding(FindingKind.BURST_NOT_BATCHED, Severity.WARNING,
                                 f"burst {k} never batched: {b.said} (from the {b.source}); no request of it shared an encoder call or a "
                                 "step, so it tested nothing a batch could break (send more at a time: --concurrency)"))
    if said and said[0] is not None and said[0].batched:
        found.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.WARNING,
                             f"the isolated runs were not alone inside the engine ({said[0].said}): another client's requests shared them"))
    nothing = compared_nothing_why(folder, settings.engine_tag, expected, got, lost) if expected and not got else ""
    if nothing:  # asked for the engine's evidence and read none: nothing inside the engine was compared (exit 5)
        found.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.ERROR, nothing))
    in_bursts = sum(len(t) for t in read[1:nb + 1])
    report.extra["engine_traces"] = {
        "folder": str(folder), "tag": settings.engine_tag, "read": got, "expected": expected, "alone": len(read[0]),
        "bursts": [len(t) for t in read[1:nb + 1]],
        "missing": len(lost.missing), "unreadable": len(lost.unreadable), "non_finite": len(lost.non_finite), "compared": bool(got),
        "local_references": len(local_traces), "batching": [b.to_json() if b is not None else None for b in said[1:nb + 1]],
        "judged_bursts": carry_traces(report, read[:nb + 1], local_traces),
        **({"warm": len(warm), "warm_batching": said[nb + 1].to_json() if said[nb + 1] is not None else None} if len(said) > nb + 1 else {}),
        "said": f"engine traces: read {got} of {expected} ({len(read[0])} alone, {in_bursts} in {nb} burst(s)"
                + (f", {len(warm)} warm" if len(read) > nb + 1 else "") + ")"
                + ("; nothing compared inside the engine" if expected and not got else "")
                + ("; compared stage by stage with the local model's" if local_traces and got else ""),
    }
    if nothing:
        report.extra["engine_traces"]["cannot_compare"] = nothing
    _say_prefix_hits(report.extra["engine_traces"], read)
    report.findings += found
    return where


def _say_prefix_hits(said: dict, read: list[dict]) -> None:
    """How many traced runs the prefix cache served a prefix of (the warm phase, `--engine-caches keep`): their comparisons used the
    positions they computed, and the report says so."""
    from qdebug.trace.cached import cached_prefix

    served = sum(1 for traces in read for trace in traces.values() if cached_prefix(trace) is not None)
    if served:
        said["cached_prefix"] = served
        said["said"] += f"; {served} read a prefix from the prefix cache (compared at the positions they computed)"


def cannot_compare(report) -> str:
    """Why an endpoint replay that asked for the engine's traces compared nothing inside the engine ('' when it did, or
    was not asked): `qdebug replay` then exits 5, whatever the answers said."""
    return str((report.extra or {}).get("engine_traces", {}).get("cannot_compare") or "")


@dataclass
class Lost:
    """The traces an endpoint replay asked for and could not use, each as (request id, phase, trace tag[, why])."""

    missing: list = field(default_factory=list)  # never appeared within --timeout
    unreadable: list = field(default_factory=list)  # there, but corrupt, truncated or not a file of the folder
    non_finite: list = field(default_factory=list)  # read, but its rows hold NaN or infinity: nothing to compare them by


def compared_nothing_why(folder: Path, tag: str, expected: int, got: int, lost: Lost) -> str:
    """The finding of a replay that read none of the `expected` traces: that nothing was compared, and the cause as
    the folder shows it (no index at all, an index without this run's traces, or traces it could not use)."""
    from qdebug.engine.trace_dir import read_index

    head = (f"engine traces: none of the {expected} traces this replay asked for could be compared (read {got}): nothing was "
            "compared inside the engine, every verdict is the answers' alone")
    if lost.non_finite and not lost.missing and not lost.unreadable:
        return f"{head}; every trace read holds non-finite values (NaN or infinity) where its rows are compared (first: {lost.non_finite[0][3]})"
    if lost.unreadable and not lost.missing:
        return f"{head}; the traces are in {folder} but could not be read (first: {lost.unreadable[0][3][:200]})"
    entries = sum(1 for _ in read_index(folder))  # lines only: an index of a long-running server is large
    plugin = ("the server's qdebug plugin is not tracing: look in the vLLM server's log for 'qdebug: not tracing this worker' "
              "(an ImportError there: vLLM was started from a folder that holds another `qdebug`, which it imported instead of "
              "the installed plugin), or for no 'qdebug: tracing' line at all (VLLM_PLUGINS=qdebug and QDEBUG_VLLM_TRACE_DIR unset)")
    if not entries:
        return f"{head}; {folder} holds no trace at all: {plugin}, or {folder} is not its QDEBUG_VLLM_TRACE_DIR"
    return (f"{head}; {folder} holds {entries:,} other trace(s) but none of this replay's (tag {tag}): {plugin}, or the server "
            "writes to another folder now")


def carry_traces(report, read: list[dict], local_traces: dict) -> dict[str, int]:
    """Give the report the traces it judged each request from (saved in its .qdr for the TUI's three-way view): the
    engine's in the burst its verdict came from (the first burst with that verdict, else the first traced), the engine's
    alone and the local model's. Returns request id → that burst's number (1-based)."""
    judged = {}
    for out in report.requests:
        rid, verdicts = out.id, out.burst_verdicts or []
        traced = [k for k in range(1, len(read)) if out.id in read[k]]
        k = next((k for k in traced if k - 1 < len(verdicts) and verdicts[k - 1] == out.verdict), traced[0] if traced else None)
        if k is not None:
            report.traces[rid], judged[rid] = read[k][rid], k
        if rid in read[0]:
            report.engine_alone[rid] = read[0][rid]
        if rid in local_traces:
            report.references[rid] = local_traces[rid]
    return judged


def _phase_traces(folder: Path, run, settings, phase: str, answers: dict, deadline: float, lost: Lost) -> dict:
    """request id → the engine's trace of its run in `phase`, for every request the server answered (the others, and
    traces that cannot be used, are noted in `lost`)."""
    from qdebug.analysis.engine_evidence import non_finite_rows
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
            lost.missing.append((rid, phase, tag))
            continue
        except (EngineTraceError, InputError, OSError) as exc:  # corrupt, truncated, or not a file of the folder
            lost.unreadable.append((rid, phase, tag, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"))
            continue
        check_engine_model(trace, run.model, run.model_aliases, tag)
        bad = non_finite_rows(trace)
        if bad:  # NaN rows match no one's: they would blame the request as contaminated by "unmatched" rows
            lost.non_finite.append((rid, phase, tag, bad))
            continue
        traces[rid] = trace
    return traces


def _batching(folder: Path, tag: str, phases: list[str], read: list[dict], runs, answered: list[dict]) -> list:
    """How each phase was batched (its BurstBatching, None when it cannot be told), and each run's partners into
    `runs.batching`: from the plugin's batch records when the folder holds them, else from the traces' own steps, when
    every answered request of the phase has its trace (a burst of missing traces is no evidence it ran unbatched)."""
    from qdebug.analysis.engine_batching import describe_from_records, describe_from_traces, from_records, from_trace
    from qdebug.engine.batch_log import read_batch_log
    from qdebug.replay.endpoint import engine_trace_id

    log = read_batch_log(folder)
    said: list = []
    for k, (phase, traces, answers) in enumerate(zip(phases, read, answered)):
        sent = [rid for rid, a in answers.items() if a.error is None]
        names = {engine_trace_id(tag, rid, phase): rid for rid in sent}
        if log.shared(set(names)).steps:
            for name, rid in names.items():
                if rid in traces:
                    runs.batching[(rid, k)] = from_records(log, name, tag, phase)
            said.append(describe_from_records(log, set(names)))
            continue
        by_engine_id = {str(engine["request_id"]): rid for rid, t in traces.items() if "request_id" in (engine := t.meta.engine or {})}
        for rid, trace in traces.items():
            runs.batching[(rid, k)] = from_trace(trace, by_engine_id)
        said.append(describe_from_traces(list(traces.values())) if traces and len(traces) == len(sent) else None)
    return said
