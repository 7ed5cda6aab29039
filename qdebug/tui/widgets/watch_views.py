"""What `qdebug watch`'s live view draws from its readings: the per-check rows (totals, rates over the readings held, a
sparkline of violations per reading), the totals line, and the rows of the latest findings (long cells capped; the
whole finding said when its row is selected). Pure functions over plain data."""

from __future__ import annotations

from qdebug.shown import shown

BARS = "▁▂▃▄▅▆▇█"
FITTED = (3, 5)  # the findings columns cut to the screen's width: request, donors (the rest are short)
TRACE_CELL = 60  # the trace column: a path relative to the watch folder, or why there is none


def sparkline(values: list[float]) -> str:
    """One character per value, scaled to the largest (all zero: a flat line)."""
    top = max(values, default=0)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(int(v / top * (len(BARS) - 1) + 0.5), len(BARS) - 1)] for v in values)


def _window(history: list) -> dict:
    """Per check, checks/violations/errors per second from the oldest reading held to the newest (a burst's rate stays
    in view between bursts, instead of a 0.0 read one interval after it)."""
    from qdebug.commands.watch import rates

    return rates(history[0], history[-1]) if len(history) > 1 else {}


def check_rows(history: list) -> list[tuple[str, ...]]:
    """A row per check from the readings so far (oldest first): total checks, violations and errors, checks/s and
    violations/s over the readings held, seconds spent, and violations per interval over time."""
    from qdebug.commands.watch import rates

    last = history[-1]
    now = _window(history)
    rows: list[tuple[str, ...]] = []
    for c in last.checks:  # the plugin's checks and any other the counters name: the rows add up to the total
        per = [rates(a, b).get(c, {}).get("violations", 0) * max(b.time - a.time, 1e-9) for a, b in zip(history, history[1:])]
        rate = now.get(c, {})
        rows.append((c, f"{int(last.counters.get('checks', {}).get(c, 0)):,}", f"{int(last.counters.get('violations', {}).get(c, 0)):,}",
                     f"{int(last.counters.get('errors', {}).get(c, 0)):,}", f"{rate.get('checks', 0):.1f}", f"{rate.get('violations', 0):.2f}",
                     f"{last.counters.get('seconds', {}).get(c, 0.0):.3f}", sparkline(per[-40:])))
    return rows


def totals_line(history: list) -> str:
    """Every check together: the totals the counters hold, and the rates over the readings held."""
    last = history[-1]
    total = {k: int(sum(last.counters.get(k, {}).values())) for k in ("checks", "violations", "errors")}
    line = f"in all: {total['checks']:,} checks, {last.violations:,} violations, {total['errors']:,} errors"
    if len(history) > 1:
        span = history[-1].time - history[0].time
        rate = _window(history)
        line += (f" · over the last {span:.0f} s: {sum(r['checks'] for r in rate.values()):.1f} checks/s, "
                 f"{sum(r['violations'] for r in rate.values()):.2f} violations/s")
    return line


def _cap(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def fit_rows(rows: list[tuple[str, ...]], width: int) -> list[tuple[str, ...]]:
    """The findings rows cut to `width` columns of screen: the short columns whole, the request and donors share what is
    left (a long donor list never pushes the time column off screen; the whole row is on the message line)."""
    from .request_table import fit_widths

    if not rows:
        return rows
    needs = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    fixed = sum(n for c, n in enumerate(needs) if c not in FITTED)
    widths = fit_widths([needs[c] for c in FITTED], width - fixed - 2 * len(needs) - 2, floor=8)  # padding, scrollbar
    cut = dict(zip(FITTED, widths))
    return [tuple(_cap(cell, cut[c]) if c in cut else cell for c, cell in enumerate(r)) for r in rows]


def _who(f) -> str:
    if f.donors:
        return "donors " + ", ".join(f.donors)
    return f"{len(f.cobatched)} co-batched" if f.cobatched else ""


def finding_row(f) -> tuple[str, ...]:
    """A findings-table row: time, check, outcome, request, stage, donors (else co-batched), trace (or why none, its first
    clause); the server's ids as data (`fit_rows` cuts them to the screen)."""
    from qdebug.engine.watch_traces import trace_said

    return (shown(f.time[11:23], 40), shown(f.check, 64), shown(f.outcome, 20), shown(f.client_id or f.request_id, 300),
            shown(f.stage, 40), shown(_who(f), 2000), _cap(shown(trace_said(f.check, f.outcome, f.trace).split("; ")[0], 600), TRACE_CELL))


def finding_said(f) -> str:
    """The whole finding in one line (the message line's, when its row is selected): every donor, the trace or why
    none, the evidence."""
    from qdebug.engine.watch_traces import trace_said

    who = f"; {_who(f)}" if _who(f) else ""
    co = f"; co-batched {', '.join(f.cobatched)}" if f.donors and f.cobatched else ""
    return shown(f"{f.client_id or f.request_id} {f.check} {f.outcome} at {f.stage}{who}{co}; {trace_said(f.check, f.outcome, f.trace)}; {f.evidence}", 4000)
