"""What a trace's visual items are called in reports and PNGs: by their modality (video 0, image 0), never "img" for a video."""

from __future__ import annotations


def is_video(trace) -> bool:
    """Whether the trace's visual items are videos (a Qwen-VL video request: `trace.images` holds them)."""
    from qdebug.trace.items import items_of

    return any(item.image is not None for item in items_of(trace, "video"))


def visual_word(trace) -> str:
    """"video" for a video request's visual items, else "image"."""
    return "video" if is_video(trace) else "image"


def order_label(order: str, trace) -> str:
    """A diff order as the request's modality reads it: image-first is video-first for a video."""
    return order.replace("image", "video") if is_video(trace) else order
