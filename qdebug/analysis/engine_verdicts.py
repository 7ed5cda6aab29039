"""An endpoint replay's verdicts from the engine's own traces: each request's reference (the local model, alone), the
engine alone and the engine in each burst, compared stage by stage (analysis.engine_compare).

Engine alone ≠ reference: `server_mismatch` at the first divergent stage. A burst whose stream held another request's
rows: `contaminated` with that burst's donor. Alone == reference, burst ≠ alone: `batch_dependent` at the first
divergent stage, naming what shared that encoder call or step; `nondeterminism` instead only when the same batch
composition (or none: a burst run that ran alone) disagrees. The answers' own judgement stands where a trace is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from qdebug.findings import Finding
from qdebug.vocab import FindingKind, Severity, StageName, Verdict

from .detectors.contamination import OWN, UNMATCHED
from .endpoint import agreed_donor
from .engine_batching import RunBatching
from .engine_compare import Parting, attribute_encoder_rows, engine_tolerance, parting
from .verdicts import burst_verdict, worst

TEXT_ONLY = (FindingKind.CONTAMINATION, FindingKind.NONDETERMINISM)  # the answers' own story, replaced by the engine's


@dataclass
class EngineRuns:
    """What the engine traced of one endpoint replay, by request id: alone, in each burst, and the local model's traces."""

    alone: dict = field(default_factory=dict)
    bursts: list = field(default_factory=list)  # per burst: request id → trace
    local: dict = field(default_factory=dict)  # --model: request id → the local model's trace ({} without)
    batching: dict = field(default_factory=dict)  # (request id, phase index: 0 alone, k burst k) → RunBatching
    rows: list = field(default_factory=list)  # per burst: request id → (donor or None, row owners) (engine_evidence.engine_rows)
    mismatch: dict = field(default_factory=dict)  # request id → where the engine alone parts from the local model (with --model)
    atol: float | None = None
    rtol: float | None = None


@dataclass
class BurstCall:
    """One burst run of one request, judged: verdict, stage, donors and who shared it."""

    verdict: Verdict
    stage: str | None = None
    donors: list = field(default_factory=list)
    partners: list = field(default_factory=list)
    parting: Parting | None = None


def apply_engine_comparison(report, runs: EngineRuns) -> list[Finding]:
    """Judge every request with an engine trace alone by the three-way comparison; its outcome's verdict, stage,
    burst verdicts, donors and co-batched requests are set, the answers' contamination and nondeterminism findings
    for it replaced; returns the findings to add."""
    found: list[Finding] = []
    for out in report.requests:
        alone = runs.alone.get(out.id)
        if alone is None or out.burst_verdicts is None:
            continue
        mismatch = parting(runs.local[out.id], alone, runs.atol, runs.rtol) if out.id in runs.local else None
        if mismatch is not None and mismatch.stage:  # what the engine's own trace saw its kernels receive (seed 001's layout)
            mismatch.findings += [f for f in alone.findings if f.kind == FindingKind.LAYOUT]
        runs.mismatch[out.id] = mismatch
        calls = [_judge_burst(out, k, alone, runs, mismatch) for k in range(len(out.burst_verdicts))]
        _settle_nondeterminism(out.id, calls, runs)
        report.findings = [f for f in report.findings if not (f.request_id == out.id and (
            f.kind in TEXT_ONLY or (mismatch is not None and f.kind == FindingKind.SERVER_MISMATCH)))]
        found += _outcome(out, calls, mismatch)
        _offsets(out, runs)
    return found


def _judge_burst(out, k: int, alone, runs: EngineRuns, mismatch: Parting | None) -> BurstCall:
    """One burst run of a request: its stream's rows first, then where it parts from the engine alone."""
    phase = runs.bursts[k] if k < len(runs.bursts) else {}
    donors = out.burst_donors[k] if out.burst_donors and k < len(out.burst_donors) else []
    rows = runs.rows[k].get(out.id, (None, {})) if k < len(runs.rows) else (None, {})
    return judge_run(out.id, out.burst_verdicts[k], donors, alone, phase, rows, runs.batching.get((out.id, k + 1), RunBatching()),
                     runs, mismatch)


def judge_run(rid: str, text: Verdict, donors: list, alone, phase: dict, rows: tuple, batching: RunBatching, runs: EngineRuns,
              mismatch: Parting | None) -> BurstCall:
    """One batched run of request `rid` (a burst's, or the warm phase's), given its answers' verdict `text` and donors, the
    engine's traces of its phase (`phase`: request id → trace), whose rows landed in its stream (`rows`), who shared it
    (`batching`): its stream's rows first, then where it parts from the engine alone (`alone`)."""
    trace = phase.get(rid)
    if text == Verdict.ERROR or trace is None:  # no answer, or no engine evidence: the answers' verdict stands
        return BurstCall(text, donors=list(donors))
    donor, owners = rows
    others = [o for o in owners if o not in (OWN, UNMATCHED)]
    if donor is not None or others or owners.get(UNMATCHED):
        return BurstCall(Verdict.CONTAMINATED, StageName.SYNC, [donor] if donor else others)
    part = parting(alone, trace, runs.atol, runs.rtol)
    if part.stage is None:
        return BurstCall(Verdict.SERVER_MISMATCH if mismatch and mismatch.stage else Verdict.OK, parting=part)
    if mismatch is not None and mismatch.stage and part.at_or_after(mismatch.stage):  # downstream of the engine's own fault
        return BurstCall(Verdict.SERVER_MISMATCH, parting=part)
    partners = batching.encoder_call if part.stage == StageName.ENCODE and batching.encoder_call else batching.batch_step
    if part.stage == StageName.ENCODE:  # whose rows the parted encoder rows are: a neighbour's, its own shifted, no one's
        neighbours = {r: t for r, t in phase.items() if r != rid}
        part.rows = attribute_encoder_rows(alone, trace, neighbours, engine_tolerance(alone, trace, runs.atol, runs.rtol))
    return BurstCall(Verdict.BATCH_DEPENDENT, part.stage, partners=list(partners), parting=part)


def repeats_a_batch(rid: str, call: BurstCall, trace, mine: RunBatching, burst_verdicts: list, runs: EngineRuns) -> bool:
    """Whether a parted run outside the bursts (the warm phase's) is nondeterminism by the bursts' rule: it ran alone, or
    in the batch composition (at its stage) of a burst run that agreed with the run alone or that it parts from."""
    if mine.alone:
        return True

    def key(b: RunBatching):
        return b.composition[0] if call.stage == StageName.ENCODE and b.composition else b.composition

    for k, verdict in enumerate(burst_verdicts):
        b = runs.batching.get((rid, k + 1))
        if b is None or b.alone or key(b) != key(mine):
            continue
        twin = runs.bursts[k].get(rid) if k < len(runs.bursts) else None
        if verdict == Verdict.OK or (twin is not None and parting(twin, trace, runs.atol, runs.rtol).stage is not None):
            return True
    return False


def _settle_nondeterminism(rid: str, calls: list[BurstCall], runs: EngineRuns) -> None:
    """A parted burst run whose batch composition is the isolated run's (nothing shared it), that of a burst run that
    agreed with it, or that of another parted burst run it disagrees with, is nondeterminism (`diverged`), not a
    batch's doing: the same batch, repeated, gave two answers."""
    def composition(k: int, stage: str | None):
        b = runs.batching.get((rid, k + 1), RunBatching())
        return None if b.alone else (b.composition[0] if stage == StageName.ENCODE and b.composition else b.composition)

    same = [k for k, c in enumerate(calls) if c.parting is not None and c.parting.stage is None]  # runs that agreed with alone
    agreed, agreed_enc = {composition(k, None) for k in same}, {composition(k, StageName.ENCODE) for k in same}
    wobbly = set()
    for k, c in enumerate(calls):
        if c.verdict != Verdict.BATCH_DEPENDENT:
            continue
        mine = composition(k, c.stage)
        if mine is None or mine in (agreed_enc if c.stage == StageName.ENCODE else agreed) or _twin_disagrees(rid, k, c, calls, runs, composition):
            wobbly.add(k)
    for k in wobbly:  # settled after all were compared: a twin's verdict must not change what the other is compared as
        calls[k].verdict = Verdict.DIVERGED


def _twin_disagrees(rid: str, k: int, call: BurstCall, calls: list[BurstCall], runs: EngineRuns, composition) -> bool:
    """Whether another parted burst run of the same batch composition (at this run's stage) parts from this one."""
    mine, trace = composition(k, call.stage), runs.bursts[k].get(rid)
    for j, other in enumerate(calls):
        if j == k or other.verdict != Verdict.BATCH_DEPENDENT or other.stage != call.stage or composition(j, call.stage) != mine:
            continue
        twin = runs.bursts[j].get(rid) if j < len(runs.bursts) else None
        if trace is not None and twin is not None and parting(trace, twin, runs.atol, runs.rtol).stage is not None:
            return True
    return False


def _outcome(out, calls: list[BurstCall], mismatch: Parting | None) -> list[Finding]:
    """Set the outcome from its burst runs and the isolated comparison; the findings that tell it."""
    rid, found = out.id, []
    out.burst_verdicts = [c.verdict for c in calls]
    out.burst_donors = [c.donors if c.verdict == Verdict.CONTAMINATED else [] for c in calls]
    out.burst_stages = [c.stage if c.verdict not in (Verdict.OK, Verdict.ERROR) else None for c in calls]
    out.co_batched = [c.partners for c in calls]
    verdict = burst_verdict(out.burst_verdicts)
    if mismatch is not None and mismatch.stage:
        verdict = worst(verdict, Verdict.SERVER_MISMATCH)
        found.append(Finding(FindingKind.SERVER_MISMATCH, Severity.ERROR,
                             f"request {rid}: inside the engine, alone, it parts from the local model at {mismatch.stage} ({mismatch.said}); "
                             f"the engine answers {out.reference!r}, the model {out.local_reference!r}",
                             stage=mismatch.stage, request_id=rid))
        found += [replace(f, request_id=rid) for f in mismatch.findings]
    out.verdict = verdict
    out.donor = agreed_donor([c.donors if c.verdict == Verdict.CONTAMINATED else [] for c in calls])
    out.stage = _stage_of(verdict, calls, mismatch)
    found += _burst_findings(out, calls)
    return found


def _burst_findings(out, calls: list[BurstCall]) -> list[Finding]:
    """One finding per kind of burst trouble of a request: batch-dependent, nondeterministic, contaminated."""
    rid, found, n = out.id, [], len(calls)
    dependent = [(k, c) for k, c in enumerate(calls, start=1) if c.verdict == Verdict.BATCH_DEPENDENT]
    if dependent:
        k, first = dependent[0]
        shared = "encoder call" if first.stage == StageName.ENCODE else "step"
        named = ", ".join(first.partners) or "no request this replay sent (the batch records name none)"
        rows = first.parting.rows if first.parting is not None else []
        said = first.parting.said if first.parting is not None else "no stage named"
        found.append(Finding(FindingKind.BATCH_DEPENDENT, Severity.ERROR,
                             f"request {rid}: in {len(dependent)}/{n} burst(s) ({', '.join(str(j) for j, _ in dependent)}) it parts from its "
                             f"isolated run inside the engine, first at {first.stage} in burst {k} ({said}); it shared that "
                             f"{shared} with {named}" + (f"; {'; '.join(rows)}" if rows else ""),
                             stage=first.stage, request_id=rid))
    wobbly = [(k, c.parting) for k, c in enumerate(calls, start=1) if c.verdict == Verdict.DIVERGED and c.parting is not None and c.parting.stage]
    if wobbly:
        k, apart = wobbly[0]
        assert apart is not None  # kept above only with its parting
        found.append(Finding(FindingKind.NONDETERMINISM, Severity.WARNING,
                             f"request {rid}: in {len(wobbly)}/{n} burst(s) it parts from its isolated run at {apart.stage} "
                             f"(burst {k}: {apart.said}) in a batch of the same composition as a run that agreed (or alone)",
                             stage=apart.stage, request_id=rid))
    dirty = [(k, c) for k, c in enumerate(calls, start=1) if c.verdict == Verdict.CONTAMINATED]
    if dirty:
        per = "; ".join(f"burst {k}: {' and '.join(c.donors) or 'another request'}" for k, c in dirty)
        found.append(Finding(FindingKind.CONTAMINATION, Severity.ERROR,
                             f"request {rid}: inside the engine its stream held other requests' visual rows in {len(dirty)}/{n} burst(s) ({per})",
                             stage=StageName.SYNC, request_id=rid, donor=out.donor))
    return found


def _stage_of(verdict: Verdict, calls: list[BurstCall], mismatch: Parting | None) -> str | None:
    """The first divergent stage behind a request's verdict (None for ok)."""
    if verdict == Verdict.SERVER_MISMATCH and mismatch is not None:
        return mismatch.stage
    return next((c.stage for c in calls if c.verdict == verdict and c.stage), None)


def _offsets(out, runs: EngineRuns) -> None:
    """text@ and visual@ from the engine's own trace (the first burst's, else the isolated run's) when the answers gave none."""
    from qdebug.trace.landing import landings

    k = next((k for k, b in enumerate(runs.bursts) if b.get(out.id) is not None), None)
    trace = runs.bursts[k][out.id] if k is not None else runs.alone.get(out.id)
    images = landings(trace) if trace is not None else []  # images' and videos' alike
    if not images:
        return
    # whose rows that burst's stream held at the request's placeholders (engine_evidence.engine_rows), as a replay's images say
    donor = runs.rows[k].get(out.id, (None, {}))[0] if k is not None and k < len(runs.rows) else None
    out.images = [{"index": i.image, "text_offset": i.text_offset, "visual_offset": i.visual_offset, "rows": i.rows, "donor": donor}
                  for i in images]
    out.text_offset, out.visual_offset = images[0].text_offset, images[0].visual_offset

