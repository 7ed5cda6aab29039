"""`--inject temporal-ids-flat`: a video's temporal position ids all 0 at prefill (a video treated as one image)."""

from __future__ import annotations

from ..fault_registry import Command, PlantContext, Planter, Preset, register


@register
class TemporalIdsFlatPreset(Preset):
    """Zero the temporal MRoPE id of every visual row (`faults.TemporalIdsFlat`)."""

    name = "temporal-ids-flat"
    help = "every video row's temporal position id set to 0, as if the video were one image"
    commands = frozenset({Command.REPLAY, Command.SERVE, Command.DIFF})

    def label(self, arg) -> str:
        """Diff's B label."""
        return "video temporal ids flat"

    def planter(self, arg, ctx: PlantContext) -> Planter:
        """The same fault for every request."""
        return _Flat()


class _Flat(Planter):
    def faults(self, request_id, request, events):
        """One TemporalIdsFlat (it reports nothing: sync measures the ids the decoder received)."""
        from ..faults import TemporalIdsFlat

        return (TemporalIdsFlat(),)
