"""The true totals of a replay report, for the batch screen's headers: a large log's report holds only a page of its
requests and findings, so its counts come from the log's index (in a worker: a query over every request)."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.vocab import Verdict


@dataclass(frozen=True)
class Totals:
    """Requests (and how many are not ok, contaminated) and findings in the whole source, and how many the report shows."""

    requests: int
    not_ok: int
    contaminated: int
    findings: int
    shown_requests: int
    shown_findings: int

    @property
    def requests_paged(self) -> bool:
        """Whether the table shows only some of the requests."""
        return self.shown_requests < self.requests

    @property
    def findings_paged(self) -> bool:
        """Whether the findings panel shows only some of the findings."""
        return self.shown_findings < self.findings


def is_indexed(report) -> bool:
    """Whether the report reads a log's index (its totals take queries: count them in a worker)."""
    return getattr(report, "log_index", None) is not None


def count_totals(report) -> Totals:
    """The totals of the report's source: from the log's index when it has one, else the report's own lists."""
    shown_requests, shown_findings = len(report.requests), len(report.findings)
    index = getattr(report, "log_index", None)
    one_request = getattr(getattr(report, "event_filter", None), "request", None) is not None
    if index is None or one_request:  # a --request report is that one request's story
        not_ok = sum(1 for r in report.requests if r.verdict != Verdict.OK)
        contaminated = sum(1 for r in report.requests if r.verdict == Verdict.CONTAMINATED)
        return Totals(shown_requests, not_ok, contaminated, shown_findings, shown_requests, shown_findings)
    from qdebug.analysis.log_report import change_findings

    verdicts = index.verdict_counts()
    requests = sum(verdicts.values())
    if report.event_filter.active:  # the filter's findings: the page is all that is counted
        findings = shown_findings
    else:  # what happened to the files while read (grew, shrank), then the events' findings
        findings = len(change_findings(index.meta)) + sum(index.finding_counts().values())
    return Totals(requests, requests - verdicts.get(Verdict.OK, 0), verdicts.get(Verdict.CONTAMINATED, 0),
                  max(findings, shown_findings), shown_requests, shown_findings)


def requests_heading(totals: Totals) -> str:
    """The requests table's title: "requests 1–2,000 of 164,265 (worst first) · Enter opens one" when it is a page."""
    if totals.requests_paged:
        return f"requests 1–{totals.shown_requests:,} of {totals.requests:,} (worst first) · Enter opens one"
    return "requests (Enter opens one)"


def findings_heading(totals: Totals) -> str:
    """The findings' first line when they are a page of the log's: "findings 1–2,000 of 16,520"; else ""."""
    return f"findings 1–{totals.shown_findings:,} of {totals.findings:,} (--json lists all)" if totals.findings_paged else ""
