"""Fault presets for exports (`qdebug export onnx --inject`): what the incident's author suspected an exporter did."""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass

from qdebug.errors import InputError

PRESETS = "transpose-weight:layer.L.mlp | transpose-weight:layer.L.attn | mrope-text-only | drop-deepstack"


@dataclass
class Injects:
    """The parsed presets of one export."""

    transpose: list[tuple[int, str]]  # (layer, "mlp" | "attn")
    text_positions: bool = False
    drop_deepstack: bool = False

    @property
    def names(self) -> list[str]:
        """The presets as given on the command line."""
        out = [f"transpose-weight:layer.{layer}.{part}" for layer, part in self.transpose]
        return out + (["mrope-text-only"] if self.text_positions else []) + (["drop-deepstack"] if self.drop_deepstack else [])


def parse_injects(values: list[str] | None, n_layers: int, deepstack: int) -> Injects:
    """Parse `--inject` values against the model (InputError naming the bad value and what was expected)."""
    out = Injects([])
    for value in values or []:
        m = re.fullmatch(r"transpose-weight:layer\.(\d+)\.(mlp|attn)", value)
        if m:
            layer = int(m.group(1))
            if layer >= n_layers:
                raise InputError(f"--inject {value}: the model has decoder layers 0..{n_layers - 1}")
            out.transpose.append((layer, m.group(2)))
        elif value == "mrope-text-only":
            out.text_positions = True
        elif value == "drop-deepstack":
            if not deepstack:
                raise InputError(f"--inject {value}: this model has no deepstack features; expected a Qwen3-VL model")
            out.drop_deepstack = True
        else:
            raise InputError(f"--inject {value}: expected one of {PRESETS}")
    return out


def _target(layer_module, part: str):
    """The weight a transpose preset writes wrong: the first square one in the block, else the first one."""
    import torch

    block = layer_module.mlp if part == "mlp" else layer_module.self_attn
    linears = [(n, m) for n, m in block.named_children() if isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.ndim == 2]
    square = [(n, m) for n, m in linears if m.weight.shape[0] == m.weight.shape[1]]
    return (square or linears)[0]


@contextmanager
def transposed_weights(model, adapter, injects: Injects):
    """Within the block, the chosen weights hold their values in transposed order (square: Wᵀ; otherwise Wᵀ's
    values laid out under W's shape, what a Linear→MatMul rewrite that forgets the transpose stores). Restored after."""
    import torch

    saved = []
    layers = adapter.decoder_layers(model)
    try:
        with torch.no_grad():
            for layer, part in injects.transpose:
                _, module = _target(layers[layer], part)
                w = module.weight
                saved.append((w, w.detach().clone()))
                w.copy_(w.detach().t().contiguous().reshape(w.shape))
        yield
    finally:
        with torch.no_grad():
            for w, original in saved:
                w.copy_(original)
