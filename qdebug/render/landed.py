"""What every view of a replay says landed in a request's stream: the measured offsets and donor, one wording.

The requests table, the Rich and TUI timelines and the timeline PNG all read these, so they name the same donor and
offset for the same run. Evidence only: a replay's fault labels (`Event.is_fault_label`) are never drawn as events.
"""

from __future__ import annotations

from qdebug.vocab import Verdict


def donor_cell(r) -> str:
    """The donor, or for an endpoint whose contaminated bursts name different requests, each burst's ("b1 req-02, b2 req-05")."""
    if r.donor:
        return r.donor
    per = [(k, d) for k, d in enumerate(getattr(r, "burst_donors", None) or [], start=1) if d]
    if r.verdict != Verdict.CONTAMINATED or not per:
        return ""
    return ", ".join(f"b{k} {'/'.join(d)}" for k, d in per)


def offset_cells(r) -> tuple[str, str]:
    """Text and measured visual offsets: one per image when a request has several ("–": none measured)."""
    images = getattr(r, "images", None) or []
    show = lambda v: "–" if v is None else str(v)  # noqa: E731
    if len(images) > 1:
        return ",".join(show(i["text_offset"]) for i in images), ",".join(show(i["visual_offset"]) for i in images)
    return show(r.text_offset), show(r.visual_offset)


def measured(report, request_id: str | None):
    """The request's outcome when this report measured its stream (a replay's images), else None (a log, no images)."""
    out = report.outcome(request_id) if request_id is not None else None
    return out if out is not None and getattr(out, "images", None) else None


def drawn_events(report) -> list:
    """The events a timeline draws: all but the fault labels (the JSON keeps those, with `origin: "fault"`)."""
    return [e for e in report.events if not e.is_fault_label]


def labels_note(report) -> str:
    """A line saying how many fault labels the timeline leaves out and where they are; "" when none."""
    n = sum(1 for e in report.events if e.is_fault_label)
    if not n:
        return ""
    return f"{n} fault labels not drawn (--json: origin \"fault\"); donors and offsets are measured"
