"""Which watch checks record a trace (read from watch_registry), and a finding's trace in words: its path, or why it
has none (the views of `qdebug watch`, live and --once, say the same)."""

from __future__ import annotations

from .watch_flight import MIN_GAP
from .watch_registry import entries


def before_decoder() -> frozenset[str]:
    """Checks that run before the step's decoder: a violation records the offending request (and its step's), from its
    first row."""
    return frozenset(e.check for e in entries() if e.records_trace())


def after_decoder() -> frozenset[str]:
    """Checks that run once the step's decoder has started: a violation arms the recorder for the next step's new
    requests."""
    return frozenset(e.check for e in entries() if not e.records_trace())


def __getattr__(name: str) -> frozenset[str]:
    """BEFORE_DECODER and AFTER_DECODER: the registry's checks as it is now (a check registered later is in them)."""
    tables = {"BEFORE_DECODER": before_decoder, "AFTER_DECODER": after_decoder}
    if name in tables:
        return tables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def trace_said(check: str, outcome: str, trace: str) -> str:
    """A finding's trace as the views show it: its path, or why it has none (the flight recorder traces a request from
    its first row, so only before the step's decoder; a check after it records the next requests instead). Before the
    first `; `: what a table cell shows."""
    if trace:
        return trace
    if outcome != "violation":
        return "no trace: the check itself failed; its error is the evidence"
    if check in after_decoder():
        return "no trace: this check runs after the step's decoder; the recorder traces the next new requests instead"
    return f"no trace: not recorded; one recording per {MIN_GAP:g} s, and a prompt begun in an earlier step cannot be"
