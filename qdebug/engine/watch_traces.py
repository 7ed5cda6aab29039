"""Which watch checks record a trace, and a finding's trace in words: its path, or why it has none (the views of
`qdebug watch`, live and --once, say the same)."""

from __future__ import annotations

from qdebug.vocab import WatchCheck

from .watch_flight import MIN_GAP

# checks that run before the step's decoder: a violation records the offending request (and its step's), from its first row
BEFORE_DECODER = frozenset({WatchCheck.PLACEMENT, WatchCheck.COUNTS, WatchCheck.POSITIONS, WatchCheck.ENCODER_BATCH})
# checks that run once the step's decoder has started: a violation arms the recorder for the next step's new requests
AFTER_DECODER = frozenset({WatchCheck.LAYOUT, WatchCheck.LOGITS})


def trace_said(check: str, outcome: str, trace: str) -> str:
    """A finding's trace as the views show it: its path, or why it has none (the flight recorder traces a request from
    its first row, so only before the step's decoder; a check after it records the next requests instead). Before the
    first `; `: what a table cell shows."""
    if trace:
        return trace
    if outcome != "violation":
        return "no trace: the check itself failed; its error is the evidence"
    if check in AFTER_DECODER:
        return "no trace: this check runs after the step's decoder; the recorder traces the next new requests instead"
    return f"no trace: not recorded; one recording per {MIN_GAP:g} s, and a prompt begun in an earlier step cannot be"
