"""`diff --inject mrope-text-only`: B feeds inputs_embeds without the MRoPE position ids (text positions only)."""

from __future__ import annotations

from ..fault_registry import Command, Preset, register


@register
class MropeTextOnlyPreset(Preset):
    """No fault object: B takes the `embeds-no-mrope` input path, which is the bug."""

    name = "mrope-text-only"
    help = "B feeds inputs_embeds without the MRoPE position ids"
    commands = frozenset({Command.DIFF})
    input_path = "embeds-no-mrope"

    def label(self, arg) -> str:
        """Diff's B label."""
        return "inputs_embeds without MRoPE ids"
