"""Pick the parser for a replay input: a JSONL capture or a runtime log."""

from __future__ import annotations

import json
import os
import zlib

from qdebug.errors import ReplayFormatError
from qdebug.input_files import file_kind, require_streamable
from qdebug.replay.batch import Batch

FORMATS = ("capture", "runtime-log")
# Peek at no more than this many non-blank lines, each read up to PEEK_LINE_BYTES.
PEEK_LINES = 5
PEEK_LINE_BYTES = 1 << 20
# A file of nothing but blank lines up to this many bytes counts as empty.
PEEK_BLANK_BYTES = 1 << 20


def detect_format(path: str | os.PathLike) -> str:
    """"capture" when one of the first non-blank lines is a JSON object, else "runtime-log" (bounded read)."""
    p = require_streamable(path, "replay input", "a JSONL capture or a runtime log", ReplayFormatError)
    from qdebug.replay.formats.runtime_log import open_log

    if file_kind(p) is not None:
        return "runtime-log"  # a pipe: a look at its first lines would take them from the log (--format capture for a capture)

    seen = blank_bytes = 0
    try:
        with open_log(p) as f:
            while seen < PEEK_LINES:
                raw = f.readline(PEEK_LINE_BYTES)
                if not raw:
                    break
                if not raw.strip():
                    blank_bytes += len(raw)
                    if blank_bytes > PEEK_BLANK_BYTES:
                        return "runtime-log"
                    continue
                seen += 1
                text = raw.decode("utf-8", "replace").lstrip("\ufeff").strip()
                if len(raw) >= PEEK_LINE_BYTES and not raw.endswith(b"\n"):
                    # Only captures (inline base64 images) have megabyte lines; a "{" start settles it.
                    if text.startswith("{"):
                        return "capture"
                    continue
                if text.startswith("{"):
                    try:
                        if isinstance(json.loads(text), dict):
                            return "capture"
                    except (ValueError, RecursionError):
                        pass
    except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a truncated or corrupt .gz
        reason = getattr(exc, "strerror", None) or exc
        raise ReplayFormatError(f"cannot read {p}: {reason} (expected a readable file)") from None
    if seen == 0:
        raise ReplayFormatError(f"empty file {p}: expected a JSONL capture or a runtime log")
    return "runtime-log"


def read_batch(path: str | os.PathLike, format: str | None = None, allow_paths: bool = False) -> Batch:
    """Read a capture or runtime log into a Batch; `format` None auto-detects."""
    if format is not None and format not in FORMATS:
        raise ReplayFormatError(f"--format {format}: unknown replay format (expected one of: {', '.join(FORMATS)})")
    kind = format or detect_format(path)
    if kind == "capture":
        from qdebug.replay.formats.capture import parse_capture
        from qdebug.replay.formats.runtime_log import GZIP_MAGIC

        with open(path, "rb") as f:
            if f.read(2) == GZIP_MAGIC:
                raise ReplayFormatError(f"{path} is a gzip-compressed capture (expected an uncompressed JSONL capture: gunzip it first)")

        return parse_capture(path, allow_paths=allow_paths)
    from qdebug.replay.formats.runtime_log import parse_runtime_log

    return parse_runtime_log(path)
