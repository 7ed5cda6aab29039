"""An endpoint replay's warm phase (production caching, after the cold phases) against each request's cold run.

By answers first (`warm_answers`): the warm answer judged as a burst answer is (its own isolated answer, another's, or
no one's), and whether it parts from the cold answer (the text, or the first token's distribution). With the engine's
traces (`warm_traces`): judged as a burst run is, stage by stage against the engine alone (analysis.engine_verdicts).
The cache provenance (analysis.cache_verdicts) may then make it `cache_contaminated`; `settle_warm` gives each request
the worse of its verdict and its warm run's, and says how a warm run that parts was judged.
"""

from __future__ import annotations

from qdebug.findings import Finding
from qdebug.replay.endpoint import WARM, EndpointRun
from qdebug.vocab import FindingKind, Severity, StageName, Verdict

from .endpoint import first_token_shift, judge
from .verdicts import settle_by_text, worst

KL_PARTS = 1e-3  # nats: a first-token distribution that moved this much parts, though the text may not (only top-k known)
SEVERE = (Verdict.CONTAMINATED, Verdict.BATCH_DEPENDENT, Verdict.SERVER_MISMATCH, Verdict.DESYNC)  # an error, not a warning


def warm_answers(report, run: EndpointRun) -> None:
    """Each request's warm answer against its own isolated answer and the others' (as a burst answer is judged)."""
    refs = {rid: a.text for rid, a in run.references.items() if a.error is None}
    for out in report.requests:
        ref, warm = run.references.get(out.id), run.warm.get(out.id)
        if ref is None or ref.error is not None or warm is None:
            continue
        if warm.error is not None:
            out.warm_verdict = Verdict.ERROR
            report.findings.append(Finding(FindingKind.REQUEST_ERROR, Severity.ERROR,
                                           f"request {out.id}: its warm request failed: {warm.error}", request_id=out.id))
            continue
        out.warm_answer = warm.text
        verdict, candidates = judge(warm.text, ref.text, {k: v for k, v in refs.items() if k != out.id})
        out.warm_verdict = verdict
        out.warm_donor = candidates[0] if len(candidates) == 1 else None
        out.warm_first_token_kl, _ = first_token_shift(ref.first_top, warm.first_top)
        kl = out.warm_first_token_kl
        out.warm_parted = warm.text.strip() != ref.text.strip() or (kl is not None and kl > KL_PARTS)


def warm_traces(report, runs, warm: dict, batching: dict) -> dict[str, str]:
    """Each warm run with an engine trace judged as a burst run (engine_verdicts.judge_run) against the engine alone;
    `warm`: request id → its warm trace, `batching`: request id → RunBatching. Returns, for each run so judged, where it
    parts from its run alone in words ("" where it does not)."""
    from .engine_batching import RunBatching
    from .engine_evidence import engine_rows
    from .engine_verdicts import judge_run, repeats_a_batch

    rows = engine_rows(warm) if warm else {}
    said: dict[str, str] = {}  # every run judged from its trace: where it parts ("" where it does not)
    for out in report.requests:
        alone = runs.alone.get(out.id)
        if alone is None or out.id not in warm or out.warm_verdict is None:
            continue
        mine = batching.get(out.id, RunBatching())
        call = judge_run(out.id, out.warm_verdict, [out.warm_donor] if out.warm_donor else [], alone, warm,
                         rows.get(out.id, (None, {})), mine, runs, runs.mismatch.get(out.id))
        if call.verdict == Verdict.BATCH_DEPENDENT and repeats_a_batch(out.id, call, warm[out.id], mine, out.burst_verdicts or [], runs):
            call.verdict = Verdict.DIVERGED  # the same batch (or none), repeated, gave another answer: never a batch's doing
        out.warm_verdict, out.warm_stage = call.verdict, call.stage
        out.warm_donor = call.donors[0] if call.verdict == Verdict.CONTAMINATED and len(call.donors) == 1 else None
        parted = call.verdict == Verdict.CONTAMINATED or (call.parting is not None and call.parting.stage is not None)
        out.warm_parted = bool(out.warm_parted) or parted
        said[out.id] = _where(call) if parted else ""
    return said


def _where(call) -> str:
    """Where a warm run parts from its run alone, and for a batch's doing who shared it (as a burst run's finding says)."""
    if call.parting is None or not call.parting.stage:
        return f"at {call.stage}: its stream held {', '.join(call.donors) or 'other'} rows"
    said = f"at {call.stage} ({call.parting.said})"
    if call.verdict == Verdict.BATCH_DEPENDENT:
        shared = "encoder call" if call.stage == StageName.ENCODE else "step"
        said += f"; it shared that {shared} with {', '.join(call.partners) or 'no request this replay sent'}"
        said += "".join(f"; {row}" for row in call.parting.rows)
    return said


def settle_warm(report, provenance: bool | None, where: dict[str, str] | None = None) -> None:
    """Each request's verdict: the worse of its own and its warm run's (a warm run judged by its answers alone moves
    only a verdict still ok or diverged, as burst answers do). A warm run that parts without a cache verdict gets a
    finding saying how it was judged and whether the engine's cache records were read (`provenance`: True read, False
    not recorded, None not asked); `where`: warm_traces' words for where each traced run parts (its keys: the runs
    judged from their traces)."""
    where = where or {}
    for out in report.requests:
        warm = out.warm_verdict
        if warm is None or warm == Verdict.ERROR:
            continue
        before = out.verdict
        measured = out.id in where or warm == Verdict.CACHE_CONTAMINATED
        out.verdict = worst(before, warm) if measured else settle_by_text(before, warm)
        if out.verdict != before and out.verdict == warm:
            out.stage, out.donor = out.warm_stage, out.warm_donor
        if not out.warm_parted or warm == Verdict.CACHE_CONTAMINATED:
            continue  # a cache verdict tells its own story (cache_verdicts)
        report.findings.append(_parted(out, provenance, where.get(out.id)))


def _parted(out, provenance: bool | None, where: str | None) -> Finding:
    """A warm run that parts from its cold run, with no cache read of another's content on record (or none read)."""
    how = f" {where}" if where else ""
    said = (f"request {out.id}: its warm run (production caching) parts from its cold run{how}: it answers {out.warm_answer!r} "
            f"where alone it answers {out.reference!r}")
    if out.warm_first_token_kl is not None:
        said += f", first-token KL {out.warm_first_token_kl:.3g}"
    if provenance:
        reads = [c for c in out.cache_reads or [] if c.get("phase") == WARM]
        said += (f"; no cache read of its warm run served it another's content ({len(reads)} read(s) of it on record, all of "
                 "its own content or unverified): not blamed on a cache")
    elif provenance is False:
        said += "; the engine recorded no cache reads of this run (its trace folder holds no batch records of it): no cache is blamed"
    else:
        said += ("; which cache served it, if any, was not read: pass --engine-traces DIR (the QDEBUG_VLLM_TRACE_DIR of a vLLM "
                 "running qdebug's plugin) for the cache provenance; no cache is blamed without it")
    said += f"; judged as a burst run: {out.warm_verdict}" + (f" @{out.warm_stage}" if out.warm_stage else "")
    severity = Severity.ERROR if out.warm_verdict in SEVERE else Severity.WARNING
    return Finding(FindingKind.WARM_RUN, severity, said, stage=out.warm_stage, request_id=out.id, donor=out.warm_donor)
