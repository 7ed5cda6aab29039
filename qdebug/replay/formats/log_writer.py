"""Write Events as runtime-log lines that parse_runtime_log reads back."""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Iterable
from pathlib import Path

from qdebug.atomic import atomic_path
from qdebug.replay.batch import Event
from qdebug.vocab import EventKind

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_LEVELS = {
    EventKind.ENCODE_START: "DEBUG",
    EventKind.BUFFER_WRITE: "DEBUG",
    EventKind.BUFFER_OVERWRITE: "DEBUG",
    EventKind.SYNC: "DEBUG",
    EventKind.FIRST_TOKEN: "DEBUG",
    EventKind.DESYNC: "WARN",
    EventKind.SHAPE_MISMATCH: "ERROR",
    EventKind.INDEX_OUT_OF_BOUNDS: "ERROR",
}
# A parsed event's message repeats the exception name and the id; strip both before rewriting it.
_SHAPE_HEAD_RE = re.compile(r"^.*?VisualEmbeddingShapeMismatch\w*:?\s*")
_RID_TAIL_RE = re.compile(r"""\s*\(?\s*request_id\s*[=:]\s*(?:"[^"]*"|'[^']*'|[^\s,;)\]}"']+)\s*\)?""")


def format_timestamp(t: float) -> str:
    """Epoch seconds as ISO-8601 UTC with microseconds (`2024-07-12T14:23:07.842000Z`)."""
    stamp = _EPOCH + _dt.timedelta(seconds=t)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _id(value: str | None, kind: str, role: str) -> str:
    """An id fit for `request_id=`: quoted when it holds characters the parser would stop at."""
    if value is None or value == "":
        raise ValueError(f"cannot write a {kind} event without its {role} request id")
    if re.search(r"""[\s,;)\]}"'=]""", value) is None:
        return value
    if len(value.splitlines()) == 1 and value == value.strip():
        if '"' not in value:
            return f'"{value}"'
        if "'" not in value:
            return f"'{value}'"
    raise ValueError(f"request id {value!r} cannot be written to a runtime log (both quote kinds, newline or edge spaces)")


def _num(value: int | None) -> str:
    """A count or offset; `unknown` (which the parser reads as None) when missing."""
    return "unknown" if value is None else str(int(value))


def format_event(event: Event) -> str:
    """One runtime-log line (no newline) for an event, with `[LEVEL]` and an ISO timestamp when t is known."""
    kind = event.kind
    level = _LEVELS.get(kind)
    if level is None:
        raise ValueError(f"unknown event kind {kind!r} (expected one of {', '.join(_LEVELS)})")
    rid = event.request_id
    if kind == EventKind.ENCODE_START:
        body = f"VisualEncoder::encode_image: request_id={_id(rid, kind, 'its')} start"
    elif kind == EventKind.BUFFER_WRITE:
        tokens = "" if event.tokens is None else f"{int(event.tokens)} "
        at = "" if event.offset is None else f" at offset {int(event.offset)}"
        body = f"VisualEncoder::write_buffer: request_id={_id(rid, kind, 'its')} wrote {tokens}tokens{at}"
    elif kind == EventKind.BUFFER_OVERWRITE:
        # The writer (donor) owns the line; the victim is the request whose buffer was replaced.
        at = "" if event.offset is None else f" at offset {int(event.offset)}"
        with_tokens = "" if event.tokens is None else f" with {int(event.tokens)} tokens"
        body = (
            f"VisualEncoder::write_buffer: request_id={_id(event.donor, kind, 'donor')} overwrote buffer"
            f"{at}{with_tokens} (previously {_id(rid, kind, 'victim')})"
        )
    elif kind == EventKind.SYNC:
        tokens = "" if event.tokens is None else f" consumed {int(event.tokens)} tokens"
        at = "" if event.offset is None else f" at offset {int(event.offset)}"
        body = f"TokenSynchronizer::stitch: request_id={_id(rid, kind, 'its')}{tokens}{at}"
    elif kind == EventKind.FIRST_TOKEN:
        body = f"Generator::decode: request_id={_id(rid, kind, 'its')} first_token"
    else:
        if kind == EventKind.DESYNC:
            body = (
                f"TokenStreamDesyncWarning: visual token offset {_num(event.offset)} "
                f"differs from textual offset {_num(event.text_offset)}"
            )
        elif kind == EventKind.SHAPE_MISMATCH:
            detail = _RID_TAIL_RE.sub("", _SHAPE_HEAD_RE.sub("", event.message or "")).strip()
            body = f"VisualEmbeddingShapeMismatchError: {detail or 'visual embedding shape mismatch'}"
        else:
            body = (
                f"CrossAttentionIndexOutOfBounds: token index {_num(event.offset)} "
                f"exceeds sequence length {_num(event.tokens)}"
            )
        if rid is not None and rid != "":
            body += f" (request_id={_id(rid, kind, 'its')})"
    body = " ".join(body.splitlines())
    prefix = "" if event.t is None else format_timestamp(event.t) + " "
    return f"{prefix}[{level}] {body}"


def write_runtime_log(events: Iterable[Event], path: str | os.PathLike) -> Path:
    """Write events as a runtime log, atomically (temp file then rename); returns the path."""
    target = Path(path)
    # Format everything first: a bad event fails before any file is created.
    lines = [format_event(e) + "\n" for e in events]
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    return target
