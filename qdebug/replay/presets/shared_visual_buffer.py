"""`--inject shared-visual-buffer`: the incident's bug (seed 000), one unlocked buffer between encode and sync."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fault_registry import Command, PlantContext, Planter, Preset, register

if TYPE_CHECKING:
    from ..shared_buffer import SharedVisualBuffer


@register
class SharedVisualBufferPreset(Preset):
    """Requests that run together write and read one visual buffer in a seeded order, without a lock."""

    name = "shared-visual-buffer"
    help = "the incident's bug: one unlocked buffer holds the latest visual rows between encode and sync, in an interleaving drawn from --seed"
    commands = frozenset({Command.REPLAY, Command.SERVE})

    def planter(self, arg, ctx: PlantContext) -> Planter:
        """Replay: a buffer per wave of concurrent requests; serve: waves of requests that arrive together."""
        return _ServedBuffer(ctx) if ctx.command == Command.SERVE else _ReplayedBuffer(ctx.seed)


class _ReplayedBuffer(Planter):
    """One buffer per replay wave, its schedule drawn from the seed and the wave's first position."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.buffer: SharedVisualBuffer | None = None

    def wave(self, items, start):
        """Draw this wave's schedule over the requests that have images."""
        from qdebug.schedule import draw_schedule

        from ..shared_buffer import SharedVisualBuffer

        # Only requests with images pass through the buffer; one without must never hold a turn it cannot take.
        users = [rid for rid, req in items if req.images]
        self.buffer = SharedVisualBuffer(draw_schedule(users, self.seed * 1_000_003 + start))

    def faults(self, request_id, request, events):
        """The buffer client of a request with images; nothing for one without."""
        from ..faults import SharedBufferClient

        if not request.images:
            return ()
        assert self.buffer is not None, "the replay draws the wave's buffer (wave) before its requests' faults"
        return (SharedBufferClient(self.buffer, request_id, events),)

    def failed(self, request_id, request):
        """Give up the failed request's turns so the rest of the wave goes on."""
        if self.buffer is not None and request.images:
            self.buffer.skip(request_id)

    def cancel(self):
        """Wake every request waiting for its turn."""
        if self.buffer is not None:
            self.buffer.cancel()


class _ServedBuffer(Planter):
    """Served requests join waves (`wave_gate.WaveGate`): those reaching sync within the window share a buffer."""

    def __init__(self, ctx: PlantContext) -> None:
        from ..wave_gate import WaveGate

        self.gate = WaveGate(ctx.seed, ctx.wave_window)

    def faults(self, request_id, request, events):
        """The served buffer client of a request with images; nothing for one without."""
        from ..wave_gate import ServedBufferClient

        return (ServedBufferClient(self.gate, request_id, events),) if request.images else ()
