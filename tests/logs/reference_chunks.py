"""The reference line splitter the scan's block reader is checked against (test-only: the scan reads blocks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from qdebug.replay.formats import log_scan  # its sizes read at each call: tests shrink them


def reference_chunks(f, progress: Callable[[int], None] | None = None) -> Iterator[list[bytes]]:
    """Lists of complete lines (no newline) from a binary file; an over-long line becomes one None."""
    carry = b""
    skipping = False
    raw = getattr(f, "fileobj", None) or f  # a .gz reports progress in compressed bytes
    while True:
        data = f.read(log_scan.CHUNK_BYTES)
        if progress is not None:
            progress(raw.tell())
        if not data:
            break
        if skipping:
            cut = data.find(b"\n")
            if cut < 0:
                continue
            data, skipping = data[cut + 1 :], False
        lines = (carry + data).split(b"\n") if carry else data.split(b"\n")
        carry = lines.pop()
        if len(carry) >= log_scan.MAX_LINE_BYTES:
            lines.append(None)  # counted once as an unknown line; the rest of it is skipped
            carry, skipping = b"", True
        yield lines
    if carry:
        yield [carry]
