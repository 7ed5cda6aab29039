"""Encoder: what an adapter declares about each of its encoders (modality, placeholder, where its rows come out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn


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


def module_at(model: "nn.Module", path: str):
    """The module at a dotted path under `model`, on either layout of a wrapper (see `_step`)."""
    trail: list = [model]
    for part in path.split("."):
        walked = _step(trail, part)
        if walked is None:
            raise AttributeError(f"{type(model).__name__} has no module at {path!r}")
        trail = walked
    return trail[-1]


def _step(trail: list, part: str) -> list | None:
    """`trail` (the modules walked so far) extended by its last module's `part`; where that module lacks it, its
    parent's `part` in its place: transformers before 5.21 kept Qwen2.5-Omni's towers on the thinker itself, its
    `model` the text decoder, where later versions put them under `model` (read from the model, not a version)."""
    for depth in (len(trail) - 1, len(trail) - 2):
        if depth < 0:
            break
        found = getattr(trail[depth], part, None)
        if found is not None:
            return [*trail[:depth + 1], found]
    return None
