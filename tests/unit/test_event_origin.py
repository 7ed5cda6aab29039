"""A fault's own reports are typed (`Event.origin`, `vocab.EventOrigin`), not recognised by their message's prefix."""

from __future__ import annotations

import json

from qdebug.analysis.replay import _event_findings
from qdebug.replay.batch import Event
from qdebug.replay.events import EventLog
from qdebug.vocab import EventKind, EventOrigin, FindingKind

KEYS = ["t", "seq", "request_id", "kind", "offset", "text_offset", "tokens", "donor", "line", "message"]


def test_an_observed_event_writes_the_json_it_always_wrote():
    event = Event(EventKind.DESYNC, "a", t=0.5, seq=3, offset=7, text_offset=4, message="injected: looks like a label")
    assert list(event.to_json()) == KEYS and event.origin == EventOrigin.OBSERVED and not event.is_fault_label


def test_a_fault_label_says_so_and_reads_back():
    log = EventLog()
    log.for_request("a")(EventKind.DESYNC, offset=7, text_offset=4, message="shifted", origin=EventOrigin.FAULT)
    (event,) = log.events
    doc = json.loads(json.dumps(event.to_json()))
    assert list(doc) == [*KEYS, "origin"] and doc["origin"] == "fault"
    again = Event(**doc)
    assert again.is_fault_label and again.origin is EventOrigin.FAULT


def test_the_analysis_reads_the_origin_not_the_message():
    """An observed desync whose message happens to start with "injected" is evidence; a fault's label is not,
    whatever it says."""
    observed = Event(EventKind.DESYNC, "a", offset=9, text_offset=4, message="injected-looking line from a runtime log")
    label = Event(EventKind.DESYNC, "b", offset=9, text_offset=4, message="rows moved by 5", origin=EventOrigin.FAULT)
    findings = _event_findings([observed, label])
    by_request = {(f.request_id, f.kind) for f in findings}
    assert ("a", FindingKind.DESYNC) in by_request and ("a", FindingKind.INJECTED) not in by_request
    assert ("b", FindingKind.INJECTED) in by_request and ("b", FindingKind.DESYNC) not in by_request
