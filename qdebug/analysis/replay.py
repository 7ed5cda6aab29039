"""Turn a replay run (or a parsed runtime log) into a ReplayReport: verdicts, donors, matrix, findings."""

from __future__ import annotations

import re
from dataclasses import dataclass

from qdebug.findings import Finding
from qdebug.replay.batch import Batch
from qdebug.replay.batched import BatchedRow
from qdebug.replay.engine import ReplayRun, encoded_rows, landed_rows
from qdebug.replay.report import ReplayReport, RequestOutcome
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import FindingKind, Severity, StageName, Verdict

from .offsets import candidates_from_references, measure_stream, media_spans
from .detectors.contamination import OWN, UNMATCHED, contamination_from_donors, contamination_matrix, donor_of, is_mixed, row_owners
from .detectors.divergence import first_token_divergence, kl, observed_sources, topk_overlap
from .detectors.log_findings import contaminating_events, contamination_from_events, findings_from_events, offsets_from_events, request_verdicts_from_events
from .verdicts import RequestEvidence, judge_request


def report_from_log(batch: Batch) -> ReplayReport:
    """A report from a runtime log alone: who was overwritten by whom, desyncs and errors; no re-execution."""
    donors = contamination_from_events(batch.events)
    verdicts = request_verdicts_from_events(batch)
    offsets = offsets_from_events(batch.events)
    ids = [r.request_id for r in batch.requests]
    outcomes = []
    for r in batch.requests:
        text_offset, visual_offset = offsets.get(r.request_id, (None, None))
        outcomes.append(RequestOutcome(
            id=r.request_id, verdict=verdicts.get(r.request_id, Verdict.OK), donor=donors.get(r.request_id),
            text_offset=text_offset, visual_offset=visual_offset, line=r.line,
        ))
    return ReplayReport(
        source=batch.source, kind="runtime-log", requests=outcomes, contamination_ids=ids,
        contamination=contamination_from_donors(ids, donors), events=list(batch.events),
        findings=findings_from_events(batch.events), unknown_lines=batch.unknown_lines,
    )


def report_from_replay(batch: Batch, run: ReplayRun) -> ReplayReport:
    """A report from re-execution: compare what landed in each stream with every request's isolated rows."""
    events = run.events.events
    ran = [r.request_id for r in batch.requests if r.request_id in run.references]
    landed, encoded = {}, {}
    for rid in ran:
        encoded[rid] = encoded_rows(run.references[rid])
        if rid in run.traces:
            landed[rid] = landed_rows(run.traces[rid])
        elif rid in run.batched:
            landed[rid] = run.batched[rid].landed
    matrix = contamination_matrix(ran, landed, encoded)
    references = {rid: run.references[rid].generated_text for rid in ran}
    candidates = candidates_from_references({rid: run.references[rid] for rid in ran})
    rows = _Rows(ran, matrix, landed, encoded)
    ids = [r.request_id for r in batch.requests]
    findings = _event_findings(events, ids)
    outcomes = []
    for req in batch.requests:
        rid = req.request_id
        out = RequestOutcome(id=rid, image=req.image_label, observed=req.observed, line=req.line)
        outcomes.append(out)
        if run.interrupted and not req.error and rid not in run.errors and rid not in run.references:
            out.verdict, out.error = Verdict.ERROR, "interrupted before it ran"
            continue
        if req.error or rid in run.errors or rid not in run.references or (rid not in landed and not run.interrupted):
            out.verdict = Verdict.ERROR
            out.error = req.error or run.errors.get(rid) or "not replayed"
            findings.append(Finding(FindingKind.REQUEST_ERROR, Severity.ERROR, f"request {rid}: {out.error}", request_id=rid))
            continue
        out.reference = references[rid]
        if rid not in landed:  # interrupted before its replay
            out.verdict, out.error = Verdict.ERROR, "interrupted before replay"
            continue
        trace = run.traces.get(rid)
        _fill_replayed(out, trace, run.batched.get(rid), run.references[rid], candidates)
        # A fault's own events are labels, never evidence: the verdict rests on the rows the decoder received.
        out.injected = sorted({e.message for e in shown_labels(events, ids) if e.request_id == rid})
        findings += _judge_replayed(out, trace, rows, references)
    report = ReplayReport(
        source=batch.source, kind="capture", mode=run.settings.mode, inject=run.settings.inject, seed=run.settings.seed,
        requests=outcomes, contamination_ids=ran, contamination=matrix, events=list(events), findings=findings,
        interrupted=run.interrupted, traces=dict(run.traces), references=dict(run.references),
    )
    return report


def contaminating_overwrites(report: ReplayReport) -> set[int]:
    """The `seq` of each overwrite the report's findings call contaminating (another request's, before the victim synced).

    The same events and rule as the findings (`_event_findings` for a replay, `findings_from_events` for a parsed log,
    the index's `contam` for an indexed one), so a picture that marks overwrites says what the findings say.
    """
    index = getattr(report, "log_index", None)
    if index is not None:  # a log's findings come from its index, which decided over the whole log, not this page
        return {e.seq for e, contaminating in index.findings(report.event_filter) if contaminating}
    events = [e for e in report.events if not e.is_fault_label] if report.kind == "capture" else list(report.events)
    return {e.seq for e in contaminating_events(events)}


def shown_labels(events, ids: tuple[str, ...] | list[str] = ()) -> list:
    """The fault labels a report repeats in words: those with a message that names no request.

    A label naming a request (the shared buffer's "rows written by request X") would be a second, unmeasured account
    of whose rows landed, which may differ from the measured one: the views name donors from the rows only.
    """
    named = re.compile("|".join(rf"(?<![\w-]){re.escape(i)}(?![\w-])" for i in ids)) if ids else None
    return [e for e in events if e.is_fault_label and e.message and (named is None or not named.search(e.message))]


def _event_findings(events, ids: tuple[str, ...] | list[str] = ()) -> list[Finding]:
    """Findings from a replay's events: desyncs and errors as they are, overwrites as `overwrite`, fault labels as `injected`.

    An event-level "contamination" is an overwrite before the sync step; the matrix decides contamination here.
    Events a fault emitted about itself are labels: they become "injected" notes (`shown_labels`), never findings of
    their own kind, and never name a donor.
    """
    labels = shown_labels(events, ids)
    from_events = findings_from_events([e for e in events if not e.is_fault_label])
    seen = set()
    for e in labels:
        if (e.request_id, e.message) not in seen:
            seen.add((e.request_id, e.message))
            from_events.append(Finding(FindingKind.INJECTED, Severity.INFO, f"request {e.request_id}: {e.message} (the fault's own word; offsets are measured)",
                                       stage=StageName.SYNC, request_id=e.request_id))
    findings = [f for f in from_events if f.kind != FindingKind.CONTAMINATION]
    findings += [Finding(FindingKind.OVERWRITE, f.severity, f.message, f.stage, f.request_id, f.donor) for f in from_events if f.kind == FindingKind.CONTAMINATION]
    return findings


@dataclass(frozen=True)
class _Rows:
    """The replay's row evidence: which requests ran, the contamination matrix, landed and isolated rows."""

    ran: list[str]
    matrix: list
    landed: dict
    encoded: dict


def _judge_replayed(out: RequestOutcome, trace, rows: _Rows, references: dict[str, str]) -> list[Finding]:
    """Gather one replayed request's evidence, set its verdict and donor (`judge_request`), and say why as findings."""
    rid = out.id
    donor = donor_of(rows.ran, rows.matrix, rid)
    mixed = is_mixed(rows.ran, rows.matrix, rid)
    failed = [c for c in (trace.stages[StageName.SYNC].checks if trace else []) if not c.ok]
    moved = [im for im in out.images if im["visual_offset"] != im["text_offset"]]
    diverged = out.replayed is not None and out.replayed != out.reference
    out.verdict = judge_request(RequestEvidence(donor=donor, damaged=bool(mixed or failed or moved), diverged=diverged))
    findings = []
    if donor is not None:
        out.donor = donor
        score = rows.matrix[rows.ran.index(rid)]
        findings.append(Finding(FindingKind.CONTAMINATION, Severity.ERROR,
            f"request {rid} received request {donor}'s visual rows (similarity {score[rows.ran.index(donor)]:.3f} vs its own {score[rows.ran.index(rid)]:.3f})"
            + (f"; it answered {out.replayed!r}, {donor}'s reference is {references[donor]!r}" if out.replayed is not None else ""),
            stage=StageName.SYNC, request_id=rid, donor=donor,
        ))
    elif mixed or failed or moved:
        findings += _desync_findings(out, rows if mixed else None, failed, moved)
    elif diverged:
        findings.append(Finding(FindingKind.DIVERGED, Severity.WARNING,
                                f"request {rid}: replayed {out.replayed!r} but its isolated reference says {out.reference!r} (first-token KL {out.first_token_kl})",
                                request_id=rid))
    # What production answered is judged beside the verdict, never into it: the verdict is this replay's own evidence
    # (judged last: where several requests answer alike, the rows this replay measured say which one it was).
    out.observed_verdict, out.observed_donor, said = observed_evidence(out, references)
    return findings + said


def _desync_findings(out: RequestOutcome, mixed_rows: _Rows | None, failed: list, moved: list[dict]) -> list[Finding]:
    """Why a stream is out of step: whose rows it mixes in (`mixed_rows`), its failed sync checks, or where its rows landed."""
    rid, findings = out.id, []
    if mixed_rows is not None:
        owners = row_owners(rid, mixed_rows.ran, mixed_rows.landed, mixed_rows.encoded)
        total = sum(owners.values())
        donors = [d for d in owners if d not in (OWN, UNMATCHED)]
        whose = {OWN: "are its own", UNMATCHED: "match no request's"}
        parts = ", ".join(f"{n} ({n / total:.0%}) " + whose.get(d, "are " + d + "'s") for d, n in owners.items())
        findings.append(Finding(FindingKind.MIXED_ROWS, Severity.ERROR,
            f"request {rid}'s stream holds a mix of visual rows: of its {total} rows, {parts}",
            stage=StageName.SYNC, request_id=rid, donor=next(iter(donors), None),
        ))
        out.donor = next(iter(donors), None)
    for check in failed:
        findings.append(Finding(FindingKind.DESYNC if check.kind == FindingKind.DESYNC else FindingKind.SHAPE_MISMATCH, Severity.ERROR,
                                f"request {rid}: {check.name} failed ({check.detail})", stage=StageName.SYNC, request_id=rid))
    if not failed:  # batched streams carry no checks: say what the measurement found
        for im in moved:
            where = "nowhere in the stream" if im["visual_offset"] is None else f"at {im['visual_offset']}"
            findings.append(Finding(FindingKind.DESYNC, Severity.ERROR, f"request {rid} image {im['index']}: visual rows landed {where}, placeholders start at {im['text_offset']}",
                                    stage=StageName.SYNC, request_id=rid))
    return findings


def _fill_replayed(out: RequestOutcome, trace, batched: BatchedRow | None, reference, candidates) -> None:
    """Texts, measured per-image offsets and first-token divergence of one replayed request.

    Offsets are measured in the embeddings the decoder received: where each image's visual rows (its own, or
    another request's) actually are, never where a sync event says they were put.
    """
    if trace is not None:
        out.replayed = trace.generated_text
        out.images = measure_stream(trace.tensor_or_none(T.SYNC_EMBEDS), media_spans(trace), out.id, candidates)
        out.first_token_kl, out.first_token_topk_overlap = first_token_divergence(reference, trace)
    elif batched is not None:
        out.images = measure_stream(batched.embeds, [(i, (int(s[0]), int(s[1]))) for i, s in enumerate(batched.spans)], out.id, candidates)
    if out.images:
        out.text_offset, out.visual_offset = out.images[0]["text_offset"], out.images[0]["visual_offset"]
    if trace is None and batched is not None:
        out.replayed = batched.text
        ref_logits, logits = reference.tensor_or_none(T.STEP_LOGITS, step=0), batched.first_logits
        if ref_logits is not None and logits is not None:
            out.first_token_kl = kl(ref_logits, logits)
            k = len(reference.steps[0].topk.token_ids) if reference.steps else 5
            out.first_token_topk_overlap = topk_overlap(ref_logits.topk(k).indices.tolist(), logits.topk(k).indices.tolist())


def observed_evidence(out: RequestOutcome, references: dict[str, str]) -> tuple[Verdict | None, str | None, list[Finding]]:
    """What production's answer says against the isolated references: (its own verdict, whose answer it is, findings); never the request's verdict."""
    if out.observed is None or out.reference is None:
        return None, None, []
    if out.observed.strip() == out.reference.strip():
        return Verdict.OK, None, []
    sources = observed_sources(out.observed, {k: v for k, v in references.items() if k != out.id})
    if sources:
        # Requests that answer alike cannot be told apart by the text: the measured donor, when it is one of them, is it.
        source = out.donor if out.donor in sources else sources[0]
        whose = f"request {source}'s reference answer" if len(sources) == 1 else \
            f"the reference answer of requests {', '.join(sources)} (alike; the rows this replay measured are {source}'s)" if source == out.donor else \
            f"the reference answer of requests {', '.join(sources)} (alike: the text cannot tell which)"
        return Verdict.CONTAMINATED, source, [Finding(FindingKind.OBSERVED_CONTAMINATION, Severity.ERROR,
                                f"request {out.id}: production returned {out.observed!r}, which is {whose}; its own is {out.reference!r}",
                                request_id=out.id, donor=source)]
    return Verdict.DIVERGED, None, [Finding(FindingKind.OBSERVED_DIVERGED, Severity.WARNING,
                                f"request {out.id}: production returned {out.observed!r}; the isolated reference says {out.reference!r}",
                                request_id=out.id)]
