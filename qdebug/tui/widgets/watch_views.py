"""What `qdebug watch`'s live view draws from its readings: the per-check rows (rates, totals, a sparkline of
violations per reading) and the rows of the latest findings. Pure functions over plain data."""

from __future__ import annotations

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """One character per value, scaled to the largest (all zero: a flat line)."""
    top = max(values, default=0)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(int(v / top * (len(BARS) - 1) + 0.5), len(BARS) - 1)] for v in values)


def check_rows(history: list) -> list[tuple[str, ...]]:
    """A row per check from the readings so far (oldest first): checks/s and violations/s over the last interval,
    total violations and errors, seconds spent, and violations per interval over time."""
    from qdebug.commands.watch import rates

    last = history[-1]
    now = rates(history[-2], last) if len(history) > 1 else {}
    rows: list[tuple[str, ...]] = []
    for c in last.checks:  # the plugin's checks and any other the counters name: the rows add up to the total
        per = [rates(a, b).get(c, {}).get("violations", 0) * max(b.time - a.time, 1e-9) for a, b in zip(history, history[1:])]
        rate = now.get(c, {})
        rows.append((c, f"{rate.get('checks', 0):.1f}", f"{rate.get('violations', 0):.2f}",
                     f"{int(last.counters.get('violations', {}).get(c, 0))}", f"{int(last.counters.get('errors', {}).get(c, 0))}",
                     f"{last.counters.get('seconds', {}).get(c, 0.0):.3f}", sparkline(per[-40:])))
    return rows


def finding_row(f) -> tuple[str, ...]:
    """A findings-table row: time, check, outcome, request, stage, donors (else co-batched), trace."""
    who = ("donors " + ", ".join(f.donors)) if f.donors else (f"{len(f.cobatched)} co-batched" if f.cobatched else "")
    return (f.time[11:23], f.check, f.outcome, f.client_id or f.request_id, f.stage, who, f.trace or "-")
