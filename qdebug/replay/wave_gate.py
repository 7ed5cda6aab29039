"""The shared-visual-buffer fault over HTTP (`qdebug serve`): requests that reach the sync step together share one buffer.

Requests arrive at a server one by one, so there is no burst list to draw a schedule from up front. A request
whose rows are ready joins the open wave; the wave closes `window` seconds after its first member joined, and
its members then write and read the one buffer in the order drawn from the seed and the wave's number. A
request that arrives alone (an isolated reference) is a wave of one and cannot be contaminated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from qdebug.replay.shared_buffer import SharedVisualBuffer
from qdebug.schedule import draw_schedule
from qdebug.trace.protocols import FaultBase


@dataclass
class Wave:
    """Members of one wave, its number, when it closes, and its buffer once closed."""

    index: int
    closes_at: float
    members: list[str] = field(default_factory=list)
    buffer: SharedVisualBuffer | None = None


class WaveGate:
    """Groups requests that reach the sync step within `window` seconds of each other into one wave."""

    def __init__(self, seed: int, window: float) -> None:
        self.seed, self.window = seed, window
        self._cond = threading.Condition()
        self._open: Wave | None = None
        self._count = 0

    def join(self, request_id: str) -> tuple[SharedVisualBuffer, Wave]:
        """Join the open wave (or open one) and wait until it closes; returns its buffer and the wave."""
        with self._cond:
            if self._open is None:
                self._open = Wave(self._count, time.monotonic() + self.window)
                self._count += 1
            wave = self._open
            wave.members.append(request_id)
            while wave.buffer is None:
                remaining = wave.closes_at - time.monotonic()
                if remaining <= 0:
                    wave.buffer = SharedVisualBuffer(draw_schedule(list(wave.members), self.seed * 1_000_003 + wave.index))
                    self._open = None
                    self._cond.notify_all()
                    break
                self._cond.wait(remaining)
            return wave.buffer, wave


@dataclass
class ServedBufferClient(FaultBase):
    """The fault as one served request sees it: join a wave, write its rows, read the buffer back."""

    gate: WaveGate
    request_id: str
    events: Callable[..., None]  # the request's event sink (buffer writes, overwrites, mismatches)
    donors: list = field(default_factory=list)
    wave: int | None = None

    def on_encoded(self, rec, rows):
        """Wait for the wave to close, write the rows, and hand the sync step whatever the buffer holds at this turn."""
        buffer, wave = self.gate.join(self.request_id)
        self.wave = wave.index
        buffer.write(self.request_id, rows, self.events)
        landed, self.donors = buffer.read(self.request_id, rows.shape[0], self.events)
        return landed
