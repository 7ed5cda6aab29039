"""The canonical names of a trace's tensors: one kind per thing captured, numbered by layer, step or media item.

These names are the keys of `Trace.tensors` and of the `.qdt` file's safetensors section, so they never change.

| kind | name | holds |
|---|---|---|
| `encode` | `encode.{item}` | the encoder's merged rows for one media item (an image, a video, a clip), numbered among all the request's items |
| `audio.envelope` | `audio.{item}.envelope` | one clip's loudness envelope |
| `sync.embeds` | `sync.embeds` | the merged embeddings the decoder received (seq × dim) |
| `sync.position_ids` | `sync.position_ids` | the (MRoPE) position ids the decoder received |
| `sync.expected_position_ids` | `sync.expected_position_ids` | the position ids `get_rope_index` computes |
| `layer.hidden` | `layer.{layer}.hidden` | a decoder layer's output over the prompt (seq × dim) |
| `layer.last` | `layer.{layer}.last` | its last prompt row only |
| `layer.step_hidden` | `layer.{layer}.step_hidden` | its output at each generation step |
| `layer.attn` | `layer.{layer}.attn` | attention weights of the kept query rows (heads × queries × keys) |
| `layer.state_norm` | `layer.{layer}.state_norm` | a linear-attention layer's state norm per kernel call and value head |
| `logits.topk_ids` | `logits.topk_ids` | top-k token ids at every prompt position |
| `logits.topk_probs` | `logits.topk_probs` | their probabilities |
| `logits.entropy` | `logits.entropy` | the entropy at every prompt position |
| `step.logits` | `step.{step}.logits` | the raw logits generation step K chose from |
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum


class TensorKind(StrEnum):
    """What a trace tensor holds; `tensor_name` numbers it by layer, step or media item."""

    ENCODE = "encode"
    AUDIO_ENVELOPE = "audio.envelope"
    SYNC_EMBEDS = "sync.embeds"
    SYNC_POSITION_IDS = "sync.position_ids"
    SYNC_EXPECTED_POSITION_IDS = "sync.expected_position_ids"
    LAYER_HIDDEN = "layer.hidden"
    LAYER_LAST = "layer.last"
    LAYER_STEP_HIDDEN = "layer.step_hidden"
    LAYER_ATTN = "layer.attn"
    LAYER_STATE_NORM = "layer.state_norm"
    LOGITS_TOPK_IDS = "logits.topk_ids"
    LOGITS_TOPK_PROBS = "logits.topk_probs"
    LOGITS_ENTROPY = "logits.entropy"
    STEP_LOGITS = "step.logits"


# Which index each kind is numbered by (None: one tensor per trace); the index goes after the kind's first word.
_INDEX = {
    TensorKind.ENCODE: "item",
    TensorKind.AUDIO_ENVELOPE: "item",
    TensorKind.LAYER_HIDDEN: "layer",
    TensorKind.LAYER_LAST: "layer",
    TensorKind.LAYER_STEP_HIDDEN: "layer",
    TensorKind.LAYER_ATTN: "layer",
    TensorKind.LAYER_STATE_NORM: "layer",
    TensorKind.STEP_LOGITS: "step",
}


def tensor_name(kind: TensorKind | str, layer: int | None = None, step: int | None = None, item: int | None = None) -> str:
    """The canonical name of a `kind` tensor (ValueError when the index it needs is missing or another is given)."""
    kind = TensorKind(kind)
    given = {k: v for k, v in (("layer", layer), ("step", step), ("item", item)) if v is not None}
    needed = _INDEX.get(kind)
    if set(given) != ({needed} if needed else set()):
        want = f"a {needed}" if needed else "no index"
        raise ValueError(f"tensor kind {kind.value!r} takes {want}, got {given or 'none'}")
    if needed is None:
        return kind.value
    head, _, tail = kind.value.partition(".")
    return f"{head}.{int(given[needed])}" + (f".{tail}" if tail else "")


def layers_holding(kind: TensorKind | str, names: Iterable[str]) -> list[int]:
    """The layers numbering the `kind` tensors among `names`, in order."""
    kind = TensorKind(kind)
    if _INDEX.get(kind) != "layer":
        raise ValueError(f"tensor kind {kind.value!r} is not numbered by layer")
    head, _, tail = kind.value.partition(".")
    pattern = re.compile(rf"{re.escape(head)}\.(\d+)\.{re.escape(tail)}")
    return sorted(int(m.group(1)) for m in map(pattern.fullmatch, names) if m)
