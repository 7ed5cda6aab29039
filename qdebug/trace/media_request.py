"""A request carrying images, clips and videos at once (Qwen2.5-Omni), each at its marker or first, in that order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .markers import media_parts
from .request import Request

__all__ = ["build_media_request", "media_parts"]


def build_media_request(prompt: str, *, images: Sequence[Any] = (), image_paths: Sequence[str] = (), clips: Sequence[Any] = (),
                        videos: Sequence[Any] = (), video_paths: Sequence[str] = (), use_audio_in_video: bool = False, max_new_tokens: int = 16,
                        request_id: str = "0") -> Request:
    """A Request with every kind of item (images opened, clips and videos decoded)."""
    counts = {"image": len(images), "audio": len(clips), "video": len(videos)}
    return Request(parts=media_parts(prompt, counts), images=list(images), image_paths=list(image_paths), max_new_tokens=max_new_tokens,
                   request_id=request_id, audios=list(clips), audio_paths=[c.source for c in clips], videos=list(videos),
                   video_paths=list(video_paths) or [v.source for v in videos], use_audio_in_video=use_audio_in_video)
