"""`--inject offset-shift:K`: every image's rows synced K positions off their placeholder span."""

from __future__ import annotations

from ..fault_registry import Command, PlantContext, Planter, Preset, register


@register
class OffsetShiftPreset(Preset):
    """Sync each image's rows K positions off its placeholders (`faults.OffsetShift`)."""

    name = "offset-shift"
    arg = "K"
    arg_help = "K an integer"
    help = "sync every image's rows K positions off its placeholder span"
    commands = frozenset({Command.REPLAY, Command.SERVE})

    def planter(self, arg, ctx: PlantContext) -> Planter:
        """The image placeholder's embedding, computed once per run: what the rows leave behind."""
        return _Shift(arg, ctx.loaded)


class _Shift(Planter):
    def __init__(self, shift: int, loaded) -> None:
        import torch

        token = loaded.adapter.image_token_id(loaded.config)
        self.shift = shift
        self.pad = loaded.adapter.embed_tokens(loaded.model)(torch.tensor([token], device=loaded.device)).detach()

    def faults(self, request_id, request, events):
        """One OffsetShift per request, reporting to the request's sink."""
        from ..faults import OffsetShift

        return (OffsetShift(self.shift, self.pad, events),)
