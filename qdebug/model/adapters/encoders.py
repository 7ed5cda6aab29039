"""Encoder: what an adapter declares about each of its encoders (modality, placeholder, where its rows come out)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Encoder:
    """One encoder of an architecture, as its adapter declares it.

    `modality`: what it reads ("image", "video", "audio"); `token_attr`: the config attribute holding its per-row
    placeholder token id; `module`: the dotted path, under the model, of the module whose output holds its rows;
    `grid_key`: the processor output with each item's (t, h, w) grid (rows = t·h·w / merge²), or None for audio
    (rows follow the feature mask, the model's own formula).
    """

    modality: str
    token_attr: str
    module: str
    grid_key: str | None = None

    def token_id(self, config) -> int | None:
        """The placeholder token id in this config (None when the config has none)."""
        value = getattr(config, self.token_attr, None)
        return int(value) if isinstance(value, int) else None


def module_at(model, path: str):
    """The module at a dotted path under `model`."""
    node = model
    for part in path.split("."):
        node = getattr(node, part)
    return node
