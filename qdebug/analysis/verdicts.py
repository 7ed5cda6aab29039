"""How evidence becomes a request's verdict: one ranking (`vocab.VERDICT_RANK`) for replays, logs and endpoints.

One rule in every mode: a verdict judges what this replay observed (its own rows and answers). What production
answered (a capture's `observed`) is judged on its own (`analysis.replay.observed_evidence`) and never moves the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.vocab import VERDICT_RANK, Verdict


def worst(*verdicts: Verdict) -> Verdict:
    """The verdict that ranks highest: where pieces of evidence disagree, the worse one wins."""
    return max(verdicts, key=VERDICT_RANK.__getitem__)


def burst_verdict(verdicts: list[Verdict]) -> Verdict:
    """A request's verdict over its burst answers by the one ranking: the worst answered verdict (a failed burst
    request hides nothing the answered ones showed), error only when none answered, ok with no burst."""
    answered = [v for v in verdicts if v != Verdict.ERROR]
    return worst(*answered) if answered else (Verdict.ERROR if verdicts else Verdict.OK)


def settle_by_text(current: Verdict, by_text: Verdict) -> Verdict:
    """`current` as raised by what answer texts alone say.

    Texts weigh less than a measured stream or an error: they move only a verdict that is still ok or diverged.
    """
    return worst(current, by_text) if VERDICT_RANK[current] <= VERDICT_RANK[Verdict.DIVERGED] else current


@dataclass(frozen=True, kw_only=True)
class RequestEvidence:
    """What a replay measured about one replayed request, before any verdict."""

    donor: str | None = None  # the other request whose isolated rows fill its stream
    damaged: bool = False  # a mix of rows, a failed sync check, or visual rows away from their placeholders
    diverged: bool = False  # its replayed answer differs from its isolated reference


def judge_request(evidence: RequestEvidence) -> Verdict:
    """One replayed request's verdict from this replay's evidence alone: its stream first (contaminated, desync), then its answer."""
    stream = worst(Verdict.OK, *([Verdict.CONTAMINATED] if evidence.donor is not None else []), *([Verdict.DESYNC] if evidence.damaged else []))
    return settle_by_text(stream, Verdict.DIVERGED if evidence.diverged else Verdict.OK)

