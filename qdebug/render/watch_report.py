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
    shown = doc["findings"][-latest:]
    if shown:
        lines.append(f"latest findings ({len(shown)} of {doc['findings_total']}):")
    for f in shown:
        who = f" donors {', '.join(f['donors'])}" if f["donors"] else ""
        lines.append(f"  {f['time']} {f['check']} {f['outcome']} {f['request_id']}{who}: {f['evidence']}")
    return lines
