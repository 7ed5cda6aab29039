"""`qdebug watch --once` as text: a row per check (checks, violations, errors, seconds) and the latest findings. Every
name and field that came from the server or its log is shown through `qdebug.shown` (hidden characters escaped)."""

from __future__ import annotations

from qdebug.engine.watch_traces import trace_said
from qdebug.shown import shown


def watch_lines(doc: dict, latest: int = 10) -> list[str]:
    """The lines of one snapshot (`WatchSnapshot.to_json()`): a row for every check it counts, so the rows add up to
    the total said first."""
    lines = [f"qdebug watch {shown(doc['source'], 300)}: {doc['violations']} violation(s)"]
    if not doc.get("counters_read", True):
        lines.append(f"no counter files (metrics-*.json): the total is the findings log's violation lines "
                     f"({doc['findings_violations']} of {doc['findings_total']} lines)")
    else:
        lines.append(f"{'check':<14}{'checks':>10}{'violations':>12}{'errors':>8}{'seconds':>10}")
    for check, row in (doc["checks"] if doc.get("counters_read", True) else {}).items():
        lines.append(f"{shown(check, 64):<14}{int(row['checks']):>10}{int(row['violations']):>12}{int(row['errors']):>8}"
                     f"{row['seconds']:>10.3f}")
    cost = plugin_cost_line(doc.get("worker") or {})
    if cost:
        lines.append(cost)
    reads = cache_reads_line(doc.get("cache_reads") or {})
    if reads:
        lines.append(reads)
    shown_findings = doc["findings"][-latest:]
    if shown_findings:
        lines.append(f"latest findings ({len(shown_findings)} of {doc['findings_total']}):")
    for f in shown_findings:
        who = f" donors {', '.join(shown(d, 200) for d in f['donors'])}" if f["donors"] else ""
        lines.append(f"  {shown(f['time'], 40)} {shown(f['check'], 64)} {shown(f['outcome'], 20)} {shown(f['request_id'], 200)}"
                     f"{who}: {shown(f['evidence'], 1000)}")
        lines.append(f"    {shown(trace_said(f['check'], f['outcome'], f['trace']), 600)}")  # the recorded trace, or why none
    return lines


def plugin_cost_line(worker: dict) -> str:
    """What the plugin costs the worker's steps, in words ('' when the server exports no clock)."""
    if not worker.get("steps") or worker.get("plugin_share") is None:
        return ""
    vllm = worker["step_seconds"] - worker["plugin_seconds"]
    return (f"plugin cost: {worker['plugin_seconds']:.3f} s in {int(worker['steps'])} worker steps against vLLM's own "
            f"{vllm:.3f} s: the step loop runs {worker['plugin_share'] * 100:.1f}% longer")


def cache_reads_line(reads: dict) -> str:
    """The cache check's reads per cache, in words ('' when none was counted)."""
    parts = [f"{shown(cache, 32)} {int(row.get('same_content', 0))} same content, {int(row.get('other_content', 0))} other "
             f"content, {int(row.get('unverified', 0))} unverified" for cache, row in reads.items()]
    return f"cache reads: {'; '.join(parts)}" if parts else ""
