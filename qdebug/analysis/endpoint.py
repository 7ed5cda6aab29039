"""Verdicts for an endpoint replay: each burst answer against the request's own isolated answer and everyone else's.

`ok`: the burst answer equals the request's isolated answer. `contaminated`: it equals another request's
isolated answer, or is much closer to it than to its own (the donor is named). `diverged`: it differs and
matches no one. Across repeats, answers that vary but never match another request are nondeterminism;
answers that match another request are contamination. Server errors are errors, never contamination. With
local references (--model), a server whose isolated answer is not the model's is `server_mismatch`; with the engine's
own traces the verdicts are re-judged stage by stage (engine_verdicts) and `recount` makes the counts follow.
"""

from __future__ import annotations

import math
from collections import Counter
from difflib import SequenceMatcher

from qdebug.findings import Finding
from qdebug.replay.batch import Batch
from qdebug.replay.endpoint import EndpointRun
from qdebug.replay.report import ReplayReport, RequestOutcome
from qdebug.vocab import FindingKind, Severity, Verdict

from .detectors.divergence import topk_overlap
from .matrix_words import ANSWERS
from .replay import observed_evidence
from .verdicts import burst_verdict, settle_by_text

CLOSE = 0.75  # word-level similarity at which an answer reads as another request's
MARGIN = 0.25  # ... when it is at least this much closer to that request's answer than to its own
SEVERAL = "several"  # what the finding and the table say when the contaminated bursts name no single donor


def similarity(a: str, b: str) -> float:
    """Word-level similarity of two answers in [0, 1] (difflib ratio over whitespace-split words)."""
    return SequenceMatcher(None, a.split(), b.split(), autojunk=False).ratio()


def judge(answer: str, own: str, others: dict[str, str]) -> tuple[Verdict, list[str]]:
    """(verdict, donor candidates) of one answer given its own reference and the other requests' references.

    Several candidates mean several requests answer alike in isolation: the answer is someone else's, but
    whose cannot be told from the text alone.
    """
    if answer.strip() == own.strip():
        return Verdict.OK, []
    exact = [rid for rid, text in others.items() if text is not None and answer.strip() == text.strip()]
    if exact:
        return Verdict.CONTAMINATED, exact
    mine = similarity(answer, own)
    scored = sorted(((similarity(answer, text), rid) for rid, text in others.items() if text is not None), reverse=True)
    if scored:
        best, donor = scored[0]
        unique = len(scored) == 1 or best - scored[1][0] > 1e-9
        if unique and best >= CLOSE and best - mine >= MARGIN:
            return Verdict.CONTAMINATED, [donor]
    return Verdict.DIVERGED, []


def first_token_shift(ref: dict | None, got: dict | None) -> tuple[float | None, float | None]:
    """(KL(ref‖got), top-k overlap) of the first token from the servers' top logprobs.

    Only the top-k is known: the reference's top-k is renormalised, and a token missing from the other side's
    top-k is given that side's smallest listed logprob (so the KL is a lower bound).
    """
    if not ref or not got:
        return None, None
    floor = min(got.values())
    total = sum(math.exp(v) for v in ref.values())
    kl = 0.0
    for token, lp in ref.items():
        p = math.exp(lp) / total
        kl += p * (math.log(p) - (got.get(token, floor) - math.log(sum(math.exp(v) for v in got.values()))))
    overlap = topk_overlap(ref, got)
    return max(kl, 0.0), overlap


def report_from_endpoint(batch: Batch, run: EndpointRun, local: dict | None = None) -> ReplayReport:
    """The replay report of an endpoint run; `local` maps id → the local model's isolated answer (--model)."""
    refs = {rid: a.text for rid, a in run.references.items() if a.error is None}
    ids = [r.request_id for r in batch.requests if r.request_id in run.references]
    findings: list[Finding] = []
    outcomes = []
    matches: dict[str, Counter[str]] = {rid: Counter() for rid in ids}  # whose isolated answer each burst answer equalled
    for req in batch.requests:
        rid = req.request_id
        out = RequestOutcome(id=rid, image=req.image_label, observed=req.observed, line=req.line)
        outcomes.append(out)
        if req.error:
            out.verdict, out.error = Verdict.ERROR, req.error
            findings.append(Finding(FindingKind.REQUEST_ERROR, Severity.ERROR, f"request {rid}: {req.error}", request_id=rid))
            continue
        ref = run.references.get(rid)
        if ref is None:
            out.verdict, out.error = Verdict.ERROR, "interrupted before it ran"
            continue
        if ref.error is not None:
            out.verdict, out.error = Verdict.ERROR, f"isolated request failed: {ref.error}"
            findings.append(Finding(FindingKind.REQUEST_ERROR, Severity.ERROR, f"request {rid}: isolated request failed: {ref.error}", request_id=rid))
            continue
        out.reference = ref.text
        answers = [burst.get(rid) for burst in run.bursts]
        out.burst_answers = [a.text if a is not None and a.error is None else None for a in answers]
        out.burst_donors = []
        verdicts: list[Verdict] = []
        errors: list[str] = []
        others = {k: v for k, v in refs.items() if k != rid}
        for a in answers:
            if a is None or a.error is not None:  # one entry per burst, so burst_donors[i] is burst i's
                verdicts.append(Verdict.ERROR)
                errors.append("interrupted before it answered" if a is None else a.error)
                out.burst_donors.append([])
                continue
            verdict, candidates = judge(a.text, ref.text, others)
            verdicts.append(verdict)
            out.burst_donors.append(candidates)
            for d in candidates:
                matches[rid][d] += 1
            if verdict == Verdict.OK:
                matches[rid][rid] += 1
        out.burst_verdicts = verdicts
        out.replayed = out.burst_answers[0] if out.burst_answers else None
        findings += bad_logprob_findings(rid, ref, answers)
        first = next((a for a in answers if a is not None and a.error is None), None)
        if first is not None:
            out.first_token_kl, out.first_token_topk_overlap = first_token_shift(ref.first_top, first.first_top)
        out.verdict = burst_verdict(verdicts)  # the one ranking (analysis.verdicts); each verdict's finding below
        if out.verdict == Verdict.CONTAMINATED:
            out.donor = agreed_donor(out.burst_donors)
            hits = verdicts.count(Verdict.CONTAMINATED)
            findings.append(Finding(FindingKind.CONTAMINATION, Severity.ERROR,
                f"request {rid} answered {hits}/{len(verdicts)} burst(s) with another request's isolated answer "
                f"({burst_donor_text(out.burst_donors, out.burst_answers)}; donor: {out.donor or SEVERAL}); its own is {ref.text!r}",
                request_id=rid, donor=out.donor,
            ))
        elif out.verdict == Verdict.DIVERGED:
            varied = sorted({t for t in out.burst_answers if t is not None and t.strip() != ref.text.strip()})
            findings.append(Finding(FindingKind.NONDETERMINISM, Severity.WARNING,
                                    f"request {rid}: {verdicts.count(Verdict.DIVERGED)}/{len(verdicts)} burst answer(s) differ from its isolated answer "
                                    f"{ref.text!r} and match no other request ({', '.join(repr(v) for v in varied[:3])})", request_id=rid))
        if errors:
            out.error = errors[0]
            for cause in sorted(set(errors)):
                findings.append(Finding(FindingKind.REQUEST_ERROR, Severity.ERROR, f"request {rid}: {errors.count(cause)} burst request(s) failed: {cause}", request_id=rid))
        if local is not None and rid in local:
            _against_local(out, local, rid, findings)
        # What production returned is reported beside the verdict, which is about this server's own answers.
        out.observed_verdict, out.observed_donor, said = observed_evidence(out, refs)
        findings += said
    matrix = [[(matches[r][d] / len(run.bursts)) if run.bursts else None for d in ids] for r in ids]
    extra = {
        "served_model": run.model,
        "schedule": f"concurrency {run.settings.concurrency}" if run.settings.concurrency else f"arrival_ts / {run.settings.speed:g}",
        # the matrix of this report is of answers, not of encoder rows: what its cells are, in words
        "matrix_of": ANSWERS,
        "local_references": local is not None,
    }
    report = ReplayReport(
        source=batch.source, kind="capture", mode="endpoint", inject=None, seed=None, requests=outcomes,
        contamination_ids=ids, contamination=matrix, events=[], findings=findings, interrupted=run.interrupted,
        endpoint=run.endpoint, repeats=len(run.bursts), extra=extra,
    )
    recount(report)
    return report


def recount(report: ReplayReport) -> None:
    """The report's counts from its outcomes as they finally stand (after the engine's evidence moved them): burst runs
    by verdict, requests by verdict, so the counts, the table's rows and the exit code tell one story."""
    runs = [v for o in report.requests for v in (o.burst_verdicts or [])]
    by_request = Counter(str(o.verdict) for o in report.requests)
    report.extra["counts"] = {
        "burst_answers": len(runs),
        "contaminated": runs.count(Verdict.CONTAMINATED), "errors": runs.count(Verdict.ERROR),
        "batch_dependent": runs.count(Verdict.BATCH_DEPENDENT),
        "requests_contaminated": by_request[Verdict.CONTAMINATED],
        "requests_nondeterministic": len({f.request_id for f in report.findings if f.kind == FindingKind.NONDETERMINISM}),
        "requests": {str(v): by_request[v] for v in Verdict if by_request[v]},
        "cache_contaminated": runs.count(Verdict.CACHE_CONTAMINATED), "requests_cache_contaminated": by_request[Verdict.CACHE_CONTAMINATED],
    }
    warm = [o for o in report.requests if o.warm_verdict is not None]
    if warm:  # the warm phase (production caching): answers, runs that part from their cold run, cache verdicts
        report.extra["counts"]["warm"] = {
            "answers": sum(1 for o in warm if o.warm_verdict != Verdict.ERROR), "parted": sum(1 for o in warm if o.warm_parted),
            "cache_contaminated": sum(1 for o in warm if o.warm_verdict == Verdict.CACHE_CONTAMINATED),
            "errors": sum(1 for o in warm if o.warm_verdict == Verdict.ERROR),
        }


def bad_logprob_findings(rid: str, ref, answers: list) -> list[Finding]:
    """One warning per answer whose top logprobs held a NaN, an infinity or a value no float holds (left out of the
    first-token comparison)."""
    named = [("isolated answer", ref)] + [(f"burst {i} answer", a) for i, a in enumerate(answers, start=1)]
    return [Finding(FindingKind.NAN_INF, Severity.WARNING,
                    f"request {rid}: the server's {where} has non-finite top logprobs ({', '.join(a.bad_logprobs[:3])}); "
                    "written as null and left out of the first-token comparison", request_id=rid)
            for where, a in named if a is not None and a.bad_logprobs]


def agreed_donor(burst_donors: list[list[str]]) -> str | None:
    """The one donor every contaminated burst names (None when bursts name different requests or one burst several)."""
    named = {tuple(c) for c in burst_donors if c}
    return named.pop()[0] if len(named) == 1 and len(next(iter(named))) == 1 else None


def burst_donor_text(burst_donors: list[list[str]], burst_answers: list[str | None]) -> str:
    """Each contaminated burst's donor and answer, bursts that agree grouped: "burst 1: req-01 ('…'), bursts 2-3: req-02 ('…')"."""
    groups: dict[tuple[str, str | None], list[int]] = {}
    for i, (candidates, answer) in enumerate(zip(burst_donors, burst_answers), start=1):
        if candidates:
            groups.setdefault((" or ".join(candidates), answer), []).append(i)
    return ", ".join(f"{'bursts' if len(n) > 1 else 'burst'} {_numbers(n)}: {who} ({answer!r})" for (who, answer), n in groups.items())


def _numbers(ns: list[int]) -> str:
    """Ascending burst numbers as runs: [1, 2, 3, 5] → "1-3, 5"."""
    runs: list[list[int]] = []
    for n in ns:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def whitespace_finding(served: str, local: str, rid: str | None = None) -> Finding:
    """The server's answer has the model's words and differs only in surrounding whitespace: how it was detokenised."""
    where = "leading" if served.lstrip() == local.lstrip() else "trailing" if served.rstrip() == local.rstrip() else "surrounding"
    return Finding(FindingKind.DETOKENIZATION, Severity.INFO,
                   f"{f'request {rid}: ' if rid else ''}the server's answer {served!r} has the model's words ({local!r}) and differs only in "
                   f"{where} whitespace: a difference of detokenisation, not of the model (a server that decodes the first token after "
                   f"the prompt, as vLLM does, puts a word-level tokenizer's separator before it)", request_id=rid)


def _against_local(out: RequestOutcome, local: dict, rid: str, findings: list[Finding]) -> None:
    """Flag a server whose isolated answer is not the model's own answer for that request."""
    truth = local[rid]
    out.local_reference = truth
    if truth is None or out.reference is None or out.reference == truth:
        return
    if out.reference.strip() == truth.strip():  # same words: say what differs, never call it a mismatch
        findings.append(whitespace_finding(out.reference, truth, rid))
        return
    verdict, candidates = judge(out.reference, truth, {k: v for k, v in local.items() if k != rid})
    donor = candidates[0] if len(candidates) == 1 else None
    if verdict == Verdict.CONTAMINATED:
        findings.append(Finding(FindingKind.SERVER_MISMATCH, Severity.ERROR,
                                f"request {rid}: the server's isolated answer {out.reference!r} is request {' or '.join(candidates)}'s answer under the local model; "
                                f"the model says {truth!r}", request_id=rid, donor=donor))
    else:
        findings.append(Finding(FindingKind.SERVER_MISMATCH, Severity.ERROR,
                                f"request {rid}: the server answers {out.reference!r} even alone; the model itself says {truth!r}", request_id=rid))
    # alone, the server is not the model: that is its verdict, never another request's contamination
    out.verdict = settle_by_text(out.verdict, Verdict.SERVER_MISMATCH)
