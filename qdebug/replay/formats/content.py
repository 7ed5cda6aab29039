"""The content codec of chat-completions bodies, shared by captures, endpoint bodies and `qdebug serve`: which OpenAI part
type each media kind travels as, each item encoded for the wire (images as PNG, video frames as vLLM's comma-separated
`data:video/jpeg` list, clips as WAV), optionally with a cache identity (`uuid`) per item."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Iterator

TEXT = "text"
# A Request part's kind → the content part type it travels as (and back).
PART_TYPE = {"image": "image_url", "video": "video_url", "audio": "input_audio"}
MEDIA_KIND = {part: kind for kind, part in PART_TYPE.items()}
# A video part keeps the data: URL it was captured as (its exact JPEG bytes) here, so a replay sends those bytes.
CAPTURED_URL = "_qdebug_captured_url"


class ContentError(Exception):
    """An item of a request that cannot travel as its own kind of part; `reason` names the item."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def item_name(kind: str, index: int) -> str:
    """How a report names a request's media item: its part type and its number among items of that kind."""
    return f"{PART_TYPE.get(kind, kind)} #{index + 1}"


def media_parts(body: dict) -> Iterator[tuple[int, int, str, dict]]:
    """(message index, part index, media kind, part) of every media part of a body's messages."""
    for i, message in enumerate(body.get("messages") or []):
        parts = message.get("content") if isinstance(message, dict) else None
        for j, part in enumerate(parts if isinstance(parts, list) else []):
            part_type = part.get("type") if isinstance(part, dict) else None
            kind = MEDIA_KIND.get(part_type) if isinstance(part_type, str) else None  # a list or object is no type
            if kind is not None:
                yield i, j, kind, part


def encode_content(request, identity: Callable[[str, int], str] | None = None) -> list[dict]:
    """A Request's parts as chat content parts, each media item as its own kind of part; `identity(kind, index)`, when
    given, is sent as the item's `uuid` (vLLM's processor/encoder cache key). ContentError names an item it cannot send."""
    content: list[dict] = []
    for kind, value in request.parts:
        if kind == TEXT:
            content.append({"type": TEXT, "text": value})
            continue
        if kind not in PART_TYPE:
            raise ContentError(f"part {len(content) + 1} is of kind {kind!r}, which no chat content part carries "
                               f"(expected text, {', '.join(PART_TYPE.values())})")
        try:
            part = {"type": PART_TYPE[kind], PART_TYPE[kind]: _encode_item(request, kind, value)}
        except (IndexError, OSError, ValueError, TypeError, AttributeError) as exc:
            raise ContentError(f"{item_name(kind, value)} cannot be encoded ({type(exc).__name__}: {exc})"[:300]) from None
        if identity is not None:
            part["uuid"] = identity(kind, value)
        content.append(part)
    return content


def _encode_item(request, kind: str, index: int) -> dict:
    """The value of one media part: {"url": data URL} for images and videos, {"data", "format"} for audio."""
    if kind == "image":
        return {"url": "data:image/png;base64," + _b64(_png(request.images[index]))}
    if kind == "audio":
        return {"data": _wav_base64(request.audios[index]), "format": "wav"}
    video = request.videos[index]
    captured = getattr(video, CAPTURED_URL, None)
    if captured:
        return {"url": captured}
    if not video.frames:
        raise ValueError("the video has no frames")
    return {"url": "data:video/jpeg;base64," + ",".join(_b64(_jpeg(f)) for f in video.frames)}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _png(image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(frame) -> bytes:
    """A frame (PIL image or HWC array) as JPEG: the only per-frame encoding vLLM's video loader takes."""
    from PIL import Image

    image = frame if isinstance(frame, Image.Image) else Image.fromarray(frame)
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def _wav_base64(clip) -> str:
    """A clip as base64 WAV at its own rate, float samples (the server resamples as its processor does)."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, clip.samples, int(clip.rate), format="WAV", subtype="FLOAT")
    return _b64(buf.getvalue())
