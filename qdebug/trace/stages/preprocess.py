"""`preprocess`: what the processor made of the request (chat text, token count, image grids and spans)."""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..image_input import notes
from ..schema import Check, ImageInfo, Stage
from ..summaries import PreprocessSummary


def image_infos(loaded, request, prepared) -> list[ImageInfo]:
    """The items attention is drawn over, one ImageInfo each: the images, else a Qwen-VL video request's videos (their
    frames' size, their grid); never a clip, nor an Omni video (its rows interleave with its sound)."""
    merge = loaded.adapter.merge_size(loaded.config)
    drawn = [m for m in prepared.media if m.modality == "image"] or \
            [m for m in prepared.media if m.modality == "video" and not loaded.adapter.mixed_media]
    out = []
    for m in drawn:
        t, h, w = m.grid_thw
        size = (request.images if m.modality == "image" else request.videos)[m.index].size
        out.append(ImageInfo(m.index, m.source, tuple(size), (t, h, w), m.extent, h // merge, w // merge))
    return out


def preprocess_stage(request, prepared, images: list[ImageInfo], videos: list | None = None) -> Stage:
    """The chat text, token count, pixel values' shape and each image's grid and placeholder span."""
    inputs = prepared.inputs
    summary = PreprocessSummary(
        text=prepared.text,
        num_tokens=len(inputs["input_ids"][0]),
        pixel_values_shape=list(inputs["pixel_values"].shape) if "pixel_values" in inputs else None,
        image_grid_thw=[list(i.grid_thw) for i in images],
        spans=[list(i.span) if i.span is not None else [] for i in images],
        image_notes=[f"image {i} ({request.image_paths[i] if i < len(request.image_paths) else i}): {note}"
                     for i, im in enumerate(request.images) for note in notes(im)] or None,
        videos=videos or None,
    )
    if request.videos:  # `videos`: frames sampled, temporal slices and grid of each (trace.stages.video)
        return Stage(StageName.PREPROCESS, summary,
                     [Check("one placeholder extent per video", len(prepared.spans) == len(request.videos), kind=FindingKind.SHAPE_MISMATCH)])
    return Stage(StageName.PREPROCESS, summary,
                 [Check("one placeholder span per image", len(prepared.spans) == len(request.images), kind=FindingKind.SHAPE_MISMATCH)])
