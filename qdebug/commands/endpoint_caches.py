"""`replay --endpoint URL`: what each phase did about the server's caches, the warm phase against the cold ones, and with
`--engine-traces DIR` what the engine recorded of every cache read of the run's requests (the `cache_reads` lines of
DIR/batches.jsonl, one per finished request, tagged for tracing or not), judged (analysis.cache_verdicts); without DIR,
or against a server that is not vLLM, the report says why no cache verdict is given."""

from __future__ import annotations

import time
from pathlib import Path

SETTLE_S = 3.0  # how long the last requests' lines may take: the plugin writes them in the engine's next step
POLL_S = 0.2


def judge_caches(report, run, folder: Path | None, settings, local_traces: dict) -> None:
    """What each phase did about the server's caches (`engine_caches`, `phases`, in words), the engine's traces (with
    --engine-traces), the warm runs against the cold ones, and the cache verdicts from the engine's record of every
    cache read; then the counts, recounted from the verdicts as they finally stand."""
    from qdebug.analysis.endpoint import recount
    from qdebug.analysis.warm import settle_warm, warm_answers
    from qdebug.replay.endpoint_phases import caches_said, phases_json

    report.extra.update(engine_caches=run.engine_caches, engine_caches_said=caches_said(run), phases=phases_json(run))
    warm_answers(report, run)
    where: dict[str, str] = {}
    settle = SETTLE_S
    if folder is not None:
        from .endpoint_engine import engine_evidence

        where = engine_evidence(report, run, folder, settings, local_traces)
        traces = report.extra["engine_traces"]
        settle = 1.0 if traces["read"] == traces["expected"] else SETTLE_S  # their lines are written in the same step
    provenance = cache_evidence(report, run, folder, settings.engine_tag, where, settle)
    settle_warm(report, provenance, where)
    recount(report)


def cache_evidence(report, run, folder: Path | None, tag: str | None, where: dict[str, str], settle: float = SETTLE_S) -> bool | None:
    """Judge the run's cache reads into `report` (verdicts, findings, `cache_provenance`); `where`: where each traced warm
    run parts (analysis.warm.warm_traces); `settle`: how long to wait for the last requests' lines (less once their
    traces, written in the same step, were all read). Returns True when the engine's records were read, False when the
    folder holds none of this run, None when none were asked for (no --engine-traces) or the server is not vLLM."""
    from qdebug.analysis.cache_verdicts import judge_cache_reads, provenance_summary, run_reads
    from qdebug.engine.batch_log import BATCH_LOG
    from qdebug.replay.endpoint import NOT_SENT, WARM, engine_trace_id
    from qdebug.replay.endpoint_phases import ISOLATED, caching, phase_names
    from qdebug.vocab import CacheKind

    if run.engine_caches == NOT_SENT:
        report.extra["cache_provenance"] = {"read": False, "said": "cache provenance: none (the server is not vLLM: its caches "
                                            "were not controlled, and no cache verdict is given without the engine's record)"}
        return None
    if folder is None or tag is None:
        report.extra["cache_provenance"] = {"read": False, "said": "cache provenance: not read (pass --engine-traces DIR, the "
                                            "QDEBUG_VLLM_TRACE_DIR of a vLLM running qdebug's plugin, to see who computed what "
                                            "each cache served; no cache verdict without it; this run's requests are named "
                                            f"{run.settings.name_tag}.<request>.<phase> in the plugin's records)"}
        return None
    phases = phase_names(run)
    answered = dict(zip(phases, [run.references, *run.bursts, *((run.warm,) if run.warm else ())]))
    origins = {engine_trace_id(tag, rid, p): (rid, p) for p in phases for rid in answered[p]}
    ours = {n for n, (rid, p) in origins.items() if answered[p][rid].error is None}
    log = _settled(folder, ours, settle)
    if not log.shared(ours).steps:
        report.extra["cache_provenance"] = {"read": False, "said": f"cache provenance: not recorded ({folder / BATCH_LOG} holds no "
                                            "step of this run's requests: expected a vLLM running qdebug's plugin with "
                                            f"QDEBUG_VLLM_TRACE_DIR={folder})"}
        return False
    reads: dict[str, dict] = {}
    for name in ours & set(log.cache_reads):
        rid, phase = origins[name]
        reads.setdefault(phase, {})[rid] = log.cache_reads[name]
    by_request = run_reads(reads, origins, phases)
    fresh = {p for p in phases if caching(run, p) == ISOLATED}
    no_warm = "" if run.warms else f"no warm phase ran (--engine-caches {run.engine_caches}), so no warm run was compared with a cold one"
    report.findings += judge_cache_reads(report, by_request, phases, fresh, where, no_warm)
    summary = provenance_summary(by_request, str(folder / BATCH_LOG))
    if run.warm and not any(r.phase == WARM and r.read.cache == CacheKind.PREFIX for rs in by_request.values() for r in rs):
        # the warm runs are tagged for tracing: say what the record shows of the prefix cache, never more
        summary["said"] += ("; no warm run read the prefix cache (a traced request reads it only where the server's qdebug "
                            "plugin lets it: one that computes a traced request's whole prompt bypasses it)")
    report.extra["cache_provenance"] = summary
    return True


def _settled(folder: Path, names: set[str], settle: float):
    """The batch log once every request of `names` that ran has had its chance to be written: a request's cache reads
    are a line written in the step after it finished (with the step lines the plugin held until then), so wait (at most
    `settle` s) while some answered request has no step line, or some that ran have no reads (a request that read no
    cache never gets one)."""
    from qdebug.engine.batch_log import read_batch_log

    deadline = time.monotonic() + settle
    while True:
        log = read_batch_log(folder)
        ran = {n for s in log.shared(names).steps for n in s.names if n in names}
        if (names <= ran and not ran - set(log.cache_reads)) or time.monotonic() > deadline:
            return log
        time.sleep(POLL_S)
