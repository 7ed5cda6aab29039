"""A request carrying images, clips and videos at once (Qwen2.5-Omni), each at its marker or first, in that order."""

from __future__ import annotations

import re

from .audio import AUDIO_MARKER
from .request import IMAGE_MARKER, Request
from .video_input import VIDEO_MARKER

_KIND_OF = {IMAGE_MARKER: "image", AUDIO_MARKER: "audio", VIDEO_MARKER: "video"}


def media_parts(prompt: str, counts: dict[str, int]) -> list[tuple[str, object]]:
    """Message parts: each kind at its markers (one per item), or, for a kind the prompt does not mark, its items
    first (images, then clips, then videos); PlaceholderError when a kind's markers and items disagree."""
    from qdebug.errors import PlaceholderError

    pieces = re.split("(" + "|".join(map(re.escape, _KIND_OF)) + ")", prompt)
    marked = {kind: sum(1 for p in pieces if _KIND_OF.get(p) == kind) for kind in counts}
    for kind, n in marked.items():
        if n and n != counts[kind]:
            raise PlaceholderError(f"prompt has {n} <{kind}> placeholder(s) but {counts[kind]} {kind} item(s) were given "
                                   f"(expected one placeholder per {kind}, or none to put them first)")
    parts: list[tuple[str, object]] = [(kind, i) for kind in ("image", "audio", "video") if not marked.get(kind) for i in range(counts.get(kind, 0))]
    seen = dict.fromkeys(counts, 0)
    for piece in pieces:
        kind = _KIND_OF.get(piece)
        if kind is None:
            if piece:
                parts.append(("text", piece))
        elif kind in seen:
            parts.append((kind, seen[kind]))
            seen[kind] += 1
    return parts


def build_media_request(prompt: str, *, images: list = (), image_paths: list[str] = (), clips: list = (), videos: list = (),
                        video_paths: list[str] = (), use_audio_in_video: bool = False, max_new_tokens: int = 16,
                        request_id: str = "0") -> Request:
    """A Request with every kind of item (images opened, clips and videos decoded)."""
    counts = {"image": len(images), "audio": len(clips), "video": len(videos)}
    return Request(parts=media_parts(prompt, counts), images=list(images), image_paths=list(image_paths), max_new_tokens=max_new_tokens,
                   request_id=request_id, audios=list(clips), audio_paths=[c.source for c in clips], videos=list(videos),
                   video_paths=list(video_paths) or [v.source for v in videos], use_audio_in_video=use_audio_in_video)
