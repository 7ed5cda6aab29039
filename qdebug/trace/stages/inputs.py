"""The input stages (`preprocess`, `encode`, `sync`) of a local run: one table from the shape a family's trace keeps them
in to the builder of that shape. Every builder is given the same `CapturedInputs`: the prepared items, the recorder and
each item's encoder rows as `trace.media.item_rows` split them from the declared encoders' calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qdebug.vocab import StageName

from ..media import item_rows
from ..schema import ImageInfo, Stage
from .encode import encode_stage
from .preprocess import image_infos, preprocess_stage
from .sync import sync_stage


@dataclass
class CapturedInputs:
    """What every input-stage builder reads: the run's model, request, prepared items and recorder, the items drawn as
    grids (`images`), and each item's encoder rows (`rows`: item → rows; `notes`: what could not be split)."""

    loaded: Any
    request: Any
    prepared: Any
    rec: Any
    images: list[ImageInfo]
    rows: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# A builder: (inputs, tensors) → (the three stages, the `meta.audio` entries or None)
Builder = Callable[[CapturedInputs, dict], tuple[dict[str, Stage], list[dict] | None]]


def visual_stages(run: CapturedInputs, tensors: dict) -> tuple[dict[str, Stage], list[dict] | None]:
    """An image or a Qwen-VL video request: one grid per image (or video), with a video's frames and slices."""
    encode, encode_rows = encode_stage(run.rows, run.notes, run.images, tensors)
    videos = None
    if run.request.videos:
        from .video import video_preps

        videos = video_preps(run.loaded, run.request, run.prepared, run.images)
    return {StageName.PREPROCESS: preprocess_stage(run.request, run.prepared, run.images, videos), StageName.ENCODE: encode,
            StageName.SYNC: sync_stage(run.loaded, run.images, encode_rows, run.rec, run.prepared.inputs, tensors, run.prepared)}, None


def clip_request_stages(run: CapturedInputs, tensors: dict) -> tuple[dict[str, Stage], list[dict] | None]:
    """An audio family's request (Qwen2-Audio): clip-shaped stages, and one `meta.audio` entry per clip."""
    from .audio import audio_stages

    return audio_stages(run.loaded, run.request, run.prepared, run.rec, run.rows, run.notes, tensors)


def mixed_stages(run: CapturedInputs, tensors: dict) -> tuple[dict[str, Stage], list[dict] | None]:
    """A request of several modalities at once (Qwen2.5-Omni): one `EncoderSpan` per item."""
    from .media import media_stages

    return media_stages(run.loaded, run.request, run.prepared, run.rec, run.rows, run.notes, tensors), None


BUILDERS: dict[str, Builder] = {"mixed": mixed_stages, "audio": clip_request_stages, "visual": visual_stages}


def trace_shape(adapter) -> str:
    """Which shape a family's trace keeps its input stages in (a key of BUILDERS)."""
    return "mixed" if adapter.mixed_media else "audio" if adapter.modality == "audio" else "visual"


def input_stages(loaded, request, prepared, rec, tensors: dict) -> tuple[dict[str, Stage], list[ImageInfo], list[dict] | None]:
    """The three input stages, the items drawn as grids, and `meta.audio` (audio families) of a local run."""
    rows, notes = item_rows(loaded, prepared.inputs, prepared.media, rec.encoder_calls)
    run = CapturedInputs(loaded, request, prepared, rec, image_infos(loaded, request, prepared), rows, notes)
    stages, audio = BUILDERS[trace_shape(loaded.adapter)](run, tensors)
    return stages, run.images, audio
