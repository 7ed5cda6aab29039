"""One clock for event times in every view: milliseconds since the first event, the wall-clock start named once."""

from __future__ import annotations

import datetime as dt

# Times above this are seconds since the epoch (a log's clock); below it, seconds since a replay started.
_ABSOLUTE = 1e8


def since_first(events) -> tuple[float, str] | None:
    """(t0, axis label) when every event carries a time: x = (e.t - t0) * 1000 ms; None: order is all there is."""
    times = [e.t for e in events if e.t is not None]
    if not events or len(times) != len(events):
        return None
    t0 = min(times)
    label = "ms since the first event"
    if t0 > _ABSOLUTE:  # an absolute clock (a log): say when that was, as the log wrote it (UTC)
        label += f" ({dt.datetime.fromtimestamp(t0, dt.timezone.utc).isoformat(timespec='milliseconds')[:-6]} UTC)"
    return t0, label
