"""Capture-policy specs from the command line: `--layers SPEC` and `--queries SPEC`."""

from __future__ import annotations

import re

from qdebug.errors import InputError

_LAYERS_HELP = "expected all, none, or decoder layer indices and ranges such as 0,5,-1 or 0-3"
_ITEM = re.compile(r"^(-?\d+)(?:-(\d+))?$")


def parse_layers(spec: str) -> list[tuple[int, int]] | None:
    """`all` → None; `none` → []; `0,5,-1` / `0-3` → inclusive (start, end) pairs (negatives count from the end)."""
    text = spec.strip().lower()
    if text == "all":
        return None
    if text == "none":
        return []
    items = []
    for part in text.split(","):
        match = _ITEM.match(part.strip())
        if not match:
            raise InputError(f"--layers {spec}: {_LAYERS_HELP}")
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if match.group(2) is not None and (start < 0 or end < start):
            raise InputError(f"--layers {spec}: a range must be LOW-HIGH with 0 <= LOW <= HIGH")
        items.append((start, end))
    return items


def resolve_layers(spec: str, items: list[tuple[int, int]] | None, n_layers: int) -> set[int] | None:
    """The layer set of a parsed spec for a model with `n_layers` decoder layers (InputError when out of range)."""
    if items is None:
        return None
    layers: set[int] = set()
    for start, end in items:
        for layer in range(start, end + 1):
            index = layer + n_layers if layer < 0 else layer
            if not 0 <= index < n_layers:
                raise InputError(f"--layers {spec}: layer {layer} is out of range; the model has layers 0..{n_layers - 1}")
            layers.add(index)
    return layers


def parse_queries(spec: str) -> str | list[int]:
    """`gen` | `all` | `POS,...` (prompt positions; negatives count from the end)."""
    text = spec.strip().lower()
    if text in ("gen", "all"):
        return text
    try:
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise InputError(f"--queries {spec}: expected gen, all, or prompt positions such as 0,12,-1") from None
