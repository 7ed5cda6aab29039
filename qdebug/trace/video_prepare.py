"""What the processor is given for a Qwen-VL request's videos (where their placeholders landed: `trace.media`)."""

from __future__ import annotations

from qdebug.errors import PlaceholderError


def video_kwargs(loaded, request) -> dict:
    """Processor arguments for the request's videos: the frames qdebug sampled, unsampled again, with their metadata
    (the processor's own timestamps and sampled rate then follow qdebug's frame indices and times)."""
    video = [enc for enc in loaded.adapter.encoders() if enc.modality == "video"]
    if not video or video[0].token_id(loaded.config) is None or getattr(loaded.processor, "video_processor", None) is None:
        raise PlaceholderError(f"{loaded.adapter.name} has no video placeholder (no video_token_id or "
                               "video processor); expected a Qwen-VL model (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) for a video")
    return {"videos": [v.frames for v in request.videos], "video_metadata": [v.metadata() for v in request.videos],
            "do_sample_frames": False}
