"""`diff --inject head-first:LAYER`: seed 001's bug, q/k/v handed to one decoder layer's kernel in the wrong axis order.

The taps are `trace/layout_faults.py`'s: `HeadFirst` in a softmax-attention layer, `HeadFirstLinear` in a
linear-attention (gated delta rule) layer of a hybrid model.
"""

from __future__ import annotations

from qdebug.errors import InputError

from ..fault_registry import Command, PlantContext, Planter, Preset, register


@register
class HeadFirstPreset(Preset):
    """Hand decoder layer LAYER's kernel q/k/v head-first at prefill."""

    name = "head-first"
    arg = "LAYER"
    arg_help = "LAYER a decoder layer index"
    help = "layer LAYER's attention kernel gets q/k/v head-first, the wrong axis order"
    commands = frozenset({Command.DIFF})

    def parse_arg(self, value: str) -> int:
        """A layer index: digits only."""
        if not value.isdigit():
            raise ValueError(value)
        return int(value)

    def label(self, arg) -> str:
        """Diff's B label."""
        return f"head-first layout in layer {arg}"

    def check_model(self, arg, model: str) -> None:
        """The layer exists, by config.json (before any weights load)."""
        from qdebug.model.limits import decoder_limits

        n = decoder_limits(model).num_layers
        if n is not None and arg >= n:
            raise InputError(f"--inject head-first:{arg}: expected a layer in 0..{n - 1} (the model has {n} decoder layers)")

    def planter(self, arg, ctx: PlantContext) -> Planter:
        """The tap for the layer's kind of attention in the loaded model."""
        loaded = ctx.loaded
        assert loaded is not None, "diff plants its fault in a loaded model"
        n_layers = len(loaded.adapter.decoder_layers(loaded.model))
        if not 0 <= arg < n_layers:
            raise InputError(f"--inject head-first:{arg}: expected a layer in 0..{n_layers - 1}")
        return _Taps(arg, _is_linear(loaded, arg))


def _is_linear(loaded, layer: int) -> bool:
    """Whether `layer` is a linear-attention layer of a hybrid model."""
    adapter = loaded.adapter
    types = adapter.layer_types(loaded.config)
    if types is None:
        return False
    return layer < len(types) and types[layer] == "linear_attention"


class _Taps(Planter):
    def __init__(self, layer: int, linear: bool) -> None:
        self.layer, self.linear = layer, linear

    def taps(self):
        """(attention taps, linear-attention taps): the fault in the one its layer uses."""
        from qdebug.trace.layout_faults import HeadFirst, HeadFirstLinear

        return ((), (HeadFirstLinear(self.layer),)) if self.linear else ((HeadFirst(self.layer),), ())
