"""`preprocess`: what the processor made of the request (chat text, token count, image grids and spans)."""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..image_input import notes
from ..schema import Check, ImageInfo, Stage
from ..summaries import PreprocessSummary


def image_infos(loaded, request, prepared) -> list[ImageInfo]:
    """One ImageInfo per image placeholder span (none for audio families)."""
    inputs = prepared.inputs
    merge = loaded.adapter.merge_size(loaded.config)
    video = bool(request.videos)  # a video request: one visual item per video (its frames' size, its grid)
    grids = inputs.get("video_grid_thw" if video else "image_grid_thw")
    media = request.videos if video else request.images
    paths = request.video_paths if video else request.image_paths
    images = []
    for i, (start, end) in enumerate([] if loaded.adapter.modality == "audio" else prepared.spans):
        t, h, w = (int(x) for x in grids[i]) if grids is not None else (1, 0, 0)
        size = media[i].size if i < len(media) else (0, 0)
        path = paths[i] if i < len(paths) else f"<{'video' if video else 'image'} {i}>"
        images.append(ImageInfo(i, path, tuple(size), (t, h, w), (start, end), h // merge, w // merge))
    return images


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
