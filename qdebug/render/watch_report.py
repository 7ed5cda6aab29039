"""`qdebug watch --once` as text: a row per check (checks, violations, errors, seconds) and the latest findings."""

from __future__ import annotations

from qdebug.vocab import WATCH_CHECKS


def watch_lines(doc: dict, latest: int = 10) -> list[str]:
    """The lines of one snapshot (`WatchSnapshot.to_json()`)."""
    lines = [f"qdebug watch {doc['source']}: {doc['violations']} violation(s)",
             f"{'check':<14}{'checks':>10}{'violations':>12}{'errors':>8}{'seconds':>10}"]
    for check in WATCH_CHECKS:
        row = doc["checks"][check.value]
        lines.append(f"{check.value:<14}{int(row['checks']):>10}{int(row['violations']):>12}{int(row['errors']):>8}{row['seconds']:>10.3f}")
    cost = plugin_cost_line(doc.get("worker") or {})
    if cost:
        lines.append(cost)
    shown = doc["findings"][-latest:]
    if shown:
        lines.append(f"latest findings ({len(shown)} of {doc['findings_total']}):")
    for f in shown:
        who = f" donors {', '.join(f['donors'])}" if f["donors"] else ""
        lines.append(f"  {f['time']} {f['check']} {f['outcome']} {f['request_id']}{who}: {f['evidence']}")
    return lines


def plugin_cost_line(worker: dict) -> str:
    """What the plugin costs the worker's steps, in words ('' when the server exports no clock)."""
    if not worker.get("steps") or worker.get("plugin_share") is None:
        return ""
    vllm = worker["step_seconds"] - worker["plugin_seconds"]
    return (f"plugin cost: {worker['plugin_seconds']:.3f} s in {int(worker['steps'])} worker steps against vLLM's own "
            f"{vllm:.3f} s: the step loop runs {worker['plugin_share'] * 100:.1f}% longer")
