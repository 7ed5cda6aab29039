"""Chunks of a big log recognised on every core: worker threads scan while this one reads ahead, renumbers and stores.

Threads, not processes: the scan's heavy part is pyarrow's RE2 and string kernels, which release the GIL, so two
threads keep two cores busy without a process's start-up, pickling of every chunk, or spawn's re-import of __main__.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


class ChunkPool:
    """Recognises chunks in order, in worker threads when `enabled` and the machine has more than one core."""

    def __init__(self, enabled: bool):
        workers = min(os.cpu_count() or 1, 8)
        self.workers = workers if enabled and workers > 1 else 0
        self.executor: ThreadPoolExecutor | None = None

    def __enter__(self) -> ChunkPool:
        if self.workers:
            from concurrent.futures import ThreadPoolExecutor

            self.executor = ThreadPoolExecutor(self.workers, thread_name_prefix="qdebug-scan")
        return self

    def __exit__(self, *exc) -> None:
        if self.executor is not None:
            # after Ctrl-C or an error nothing waits for chunks not yet started
            self.executor.shutdown(wait=True, cancel_futures=True)

    def scan(self, blocks: Iterable[tuple[bytes | bytearray, int, bool]], scan_block: Callable, clock) -> Iterator[tuple]:
        """(events table numbered from line 1 and seq 0, its summary (log_partials), lines, unknown, overlong) per block,
        in the blocks' order.

        `clock` (log_line._seconds_cache) is shared: its values are the same whichever thread fills them.
        """
        if self.executor is None:
            for buf, stop, overlong in blocks:
                table, _seq, lines, unknown, summary = scan_block(buf, stop, 0, 0, clock)
                yield table, summary, lines, unknown, overlong
            return
        pending: deque = deque()
        for buf, stop, overlong in blocks:
            pending.append((self.executor.submit(scan_block, buf, stop, 0, 0, clock), overlong))
            if len(pending) > self.workers:  # read ahead this far: bounded memory, no worker idle
                yield self._done(pending.popleft())
        while pending:
            yield self._done(pending.popleft())

    @staticmethod
    def _done(item) -> tuple:
        future, overlong = item
        table, _seq, lines, unknown, summary = future.result()
        return table, summary, lines, unknown, overlong

    @staticmethod
    def renumber(table, line0: int, seq: int):
        """The chunk's events with their line numbers and seqs counted from the start of the whole scan."""
        import pyarrow.compute as pc

        if not table.num_rows or (line0 == 0 and seq == 0):
            return table
        table = table.set_column(0, "seq", pc.add(table.column(0), seq))
        return table.set_column(1, "line", pc.add(table.column(1), line0))
