"""The shared-visual-buffer fault: one process-wide buffer between encode and sync, without a lock.

Each request writes its merged visual rows into the same region (offset 0) and reads the region back when it
is synced into its token stream. The order of writes and reads across concurrent requests follows a schedule
drawn from a seed, enforced with a condition variable, so an interleaving that contaminates a request is
reproduced exactly on every run instead of depending on thread timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qdebug.vocab import EventKind

if TYPE_CHECKING:
    from torch import Tensor


class ScheduleCancelled(Exception):
    """Raised in a waiting worker when the replay is interrupted."""


@dataclass
class SharedVisualBuffer:
    """The process-wide buffer plus the turn order for one wave of concurrent requests."""

    schedule: list[tuple[str, str]]
    rows: Tensor | None = None  # capacity × dim, grown as needed
    owner: list = field(default_factory=list)  # request id that last wrote each row
    turn: int = 0
    cancelled: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)

    def _wait_turn(self, op: str, rid: str) -> None:
        with self.cond:
            ok = self.cond.wait_for(
                lambda: self.cancelled or (self.turn < len(self.schedule) and self.schedule[self.turn] == (op, rid)), timeout=600
            )
            if self.cancelled or not ok:
                raise ScheduleCancelled(f"{op} of request {rid} never got its turn")

    def _advance(self) -> None:
        with self.cond:
            self.turn += 1
            self.cond.notify_all()

    def cancel(self) -> None:
        """Wake every waiting worker with ScheduleCancelled."""
        with self.cond:
            self.cancelled = True
            self.cond.notify_all()

    def skip(self, rid: str) -> None:
        """Drop a failed request's remaining turns so the others are not left waiting for it."""
        with self.cond:
            self.schedule = self.schedule[: self.turn] + [op for op in self.schedule[self.turn :] if op[1] != rid]
            self.cond.notify_all()

    def write(self, rid: str, rows, events: Callable[..., None]) -> None:
        """Write `rows` at offset 0 when it is this request's turn; report a write or an overwrite."""
        import torch

        self._wait_turn("write", rid)
        try:
            n = rows.shape[0]
            previous = {o for o in self.owner[:n] if o is not None and o != rid and o in self._unread()}
            if self.rows is None or self.rows.shape[0] < n:
                grown = torch.zeros(n, rows.shape[1], dtype=rows.dtype, device=rows.device)
                if self.rows is not None:
                    grown[: self.rows.shape[0]] = self.rows
                    self.owner += [None] * (n - len(self.owner))
                else:
                    self.owner = [None] * n
                self.rows = grown
            self.rows[:n] = rows
            self.owner[:n] = [rid] * n
            if previous:
                for victim in sorted(previous):
                    events(EventKind.BUFFER_OVERWRITE, offset=0, tokens=n, victim=victim)
            else:
                events(EventKind.BUFFER_WRITE, offset=0, tokens=n)
        finally:
            self._advance()

    def _unread(self) -> set[str]:
        """Requests that have written but not yet read (their data is still waiting in the buffer)."""
        done = self.schedule[: self.turn]
        written = {rid for op, rid in done if op == "write"}
        read = {rid for op, rid in done if op == "read"}
        return written - read

    def read(self, rid: str, n: int, events: Callable[..., None]):
        """Read `n` rows at offset 0 when it is this request's turn; report whose rows they were."""
        self._wait_turn("read", rid)
        try:
            assert self.rows is not None, "a request reads after its own write (draw_schedule's order)"
            rows = self.rows[:n].clone()
            owners = self.owner[:n]
            donors = sorted({o for o in owners if o != rid})
            writers = sorted(set(owners), key=owners.index)
            last_writer = writers[0] if writers else rid
            written = sum(1 for o in self.owner if o == last_writer)
            if donors and written != n:
                events(EventKind.SHAPE_MISMATCH, offset=0, tokens=n,
                       message=f"buffer holds {written} rows written by request {last_writer}; request {rid} has {n} placeholders")
            return rows, donors
        finally:
            self._advance()
