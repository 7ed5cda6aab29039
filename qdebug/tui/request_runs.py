"""One request of a replay report as the request screen shows it: its runs (a local replay's replayed and reference
traces; an endpoint replay's engine in the burst judged, engine alone and local model: three ways), or why there are
none, in words that name the reason."""

from __future__ import annotations

from qdebug.shown import shown

from .images import image_dirs_for
from .state import TraceDoc


def request_runs(report, rid: str, source: str) -> list[TraceDoc]:
    """The request's traces in the order `t` cycles them, the judged (replayed) run first; [] when the report holds none."""
    dirs = image_dirs_for(source, report.source, report.source_dir)  # a capture names its images relative to its folder
    endpoint = bool(getattr(report, "endpoint", None))
    burst = ((report.extra.get("engine_traces") or {}).get("judged_bursts") or {}).get(rid) if endpoint else None
    named = [
        (report.traces.get(rid), f"engine, burst {burst}" if burst else "engine in a burst" if endpoint else "replayed"),
        (report.engine_alone.get(rid), "engine alone"),
        (report.references.get(rid), "local model (reference)" if endpoint else "reference"),
    ]
    docs: list[TraceDoc] = []
    for trace, role in named:
        if trace is not None:
            first = not docs
            docs.append(TraceDoc(trace, source=f"{role} of {shown(rid, 200)} ({shown(source, 300)})", role=role, image_dirs=dirs,
                                 outcome=report.outcome(rid) if first else None))
    return docs


def no_runs_said(report, rid: str) -> str:
    """Why the report holds no trace of `rid`, naming what would give one."""
    who = f"request {shown(rid, 200)}"
    if report.kind == "runtime-log":
        return f"{who}: no trace in this report (runtime logs carry no tensors)"
    if rid in (getattr(report, "traces_left_out", None) or []):
        limit = getattr(report, "trace_limit_mb", None)
        return (f"{who}: its traces were left out of this .qdr (the report's traces passed QDEBUG_REPORT_TRACE_MB"
                f"{f'={limit}' if limit else ''} MiB); raise it and save again")
    outcome = report.outcome(rid)
    if getattr(report, "endpoint", None):
        if not report.extra.get("engine_traces"):
            return (f"{who}: no trace: this endpoint replay did not ask for the engine's traces (replay --endpoint ... "
                    "--engine-traces DIR on a vLLM running qdebug's plugin; --model for the local model's)")
        return f"{who}: no trace: the engine wrote none for it (see the findings)"
    if outcome is not None and outcome.error:
        return f"{who}: no trace: the request failed ({shown(outcome.error, 200)})"
    return f"{who}: no trace in this report (saved without traces)"
