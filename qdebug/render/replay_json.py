"""Replay JSON written as a stream: a log's requests, events and findings go out as they are read from its index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def _target(target: str) -> Iterator[IO[str]]:
    """stdout for `-`, else a temporary sibling renamed into place when the whole document is written."""
    if target == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    from qdebug.atomic import atomic_path

    with atomic_path(Path(target)) as tmp, open(tmp, "w", encoding="utf-8") as f:
        yield f


# One encoder for every item: json.dumps(..., ensure_ascii=False) builds a new JSONEncoder per call (a large log's
# --json encodes hundreds of thousands of items)
_encode = json.JSONEncoder(ensure_ascii=False).encode


def _array(out: IO[str], items: Iterable, indent: str) -> None:
    """A JSON array with one item per line, written item by item."""
    out.write("[")
    first = True
    for item in items:
        out.write(("\n" if first else ",\n") + indent + "  " + _encode(item))
        first = False
    out.write("]" if first else "\n" + indent + "]")


def write_report_json(report, target: str | None) -> None:
    """The `--json` document: whole in one go for a capture, streamed from the index for a runtime log."""
    if target is None:
        return
    index = getattr(report, "log_index", None)
    if index is None:
        with _target(target) as out:
            out.write(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
        return
    from qdebug.analysis.log_report import iter_cells, iter_findings, outcome_from_row

    flt = report.event_filter
    head = report.to_json()
    streamed = {
        "requests": lambda: (outcome_from_row(r).to_json() for r in index.requests(flt.request if flt else None)),
        "events": lambda: (e.to_json() for e in index.events(flt)),
        "findings": lambda: (f.to_json() for f in iter_findings(index, flt)),
    }
    with _target(target) as out:
        out.write("{")
        for i, (key, value) in enumerate(head.items()):
            out.write(("\n" if i == 0 else ",\n") + f"  {json.dumps(key)}: ")
            if key in streamed:
                _array(out, streamed[key](), "  ")
            elif key == "contamination":
                out.write('{\n    "ids": ')
                _array(out, (r[0] for r in index.requests(flt.request if flt else None)), "    ")
                out.write(',\n    "matrix": null,\n    "cells": ')
                _array(out, iter_cells(index, flt.request if flt else None), "    ")
                out.write("\n  }")
            else:
                out.write(json.dumps(value, ensure_ascii=False))
        out.write("\n}\n")


def write_events_jsonl(report, target: str) -> None:
    """`--jsonl`: one event per line (the filtered events of a log, streamed; a capture's replay events)."""
    index = getattr(report, "log_index", None)
    events = index.events(report.event_filter) if index is not None else report.events
    with _target(target) as out:
        for e in events:
            out.write(_encode(e.to_json()) + "\n")
