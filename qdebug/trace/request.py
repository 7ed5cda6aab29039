"""Request: what one user sends (images, prompt text, generation settings)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .markers import IMAGE_MARKER, media_parts

__all__ = ["IMAGE_MARKER", "Request", "build_media_request", "build_request", "load_image"]


@dataclass
class Request:
    """One multimodal request.

    `parts` is the user message in order: each item is ("image", index into `images`) or ("text", str).
    `images` are PIL images (already opened and verified); `image_paths` name their sources for reports.
    """

    parts: list[tuple[str, object]]
    images: list = field(default_factory=list)
    image_paths: list[str] = field(default_factory=list)
    max_new_tokens: int = 16
    request_id: str = "0"
    # Audio clips (qdebug.trace.audio.Clip), referenced by ("audio", index) parts; for audio families.
    audios: list = field(default_factory=list)
    audio_paths: list[str] = field(default_factory=list)
    # Videos (qdebug.trace.video_input.Video), referenced by ("video", index) parts; for Qwen-VL families.
    videos: list = field(default_factory=list)
    video_paths: list[str] = field(default_factory=list)
    # Qwen2.5-Omni: each video's own audio track is an audio item too, interleaved with its frames in time.
    use_audio_in_video: bool = False

    @property
    def prompt_text(self) -> str:
        """The text of the message with `<image>` where each image goes."""
        markers = {"image": IMAGE_MARKER, "audio": "<audio>", "video": "<video>"}
        return "".join(markers.get(kind, str(value)) for kind, value in self.parts)

    def messages(self) -> list[dict]:
        """The chat messages in the Hugging Face multimodal format."""
        content = [{"type": kind} if kind in ("image", "audio", "video") else {"type": "text", "text": value} for kind, value in self.parts]
        return [{"role": "user", "content": content}]


def load_image(path: str | Path):
    """Open and fully decode an image as RGB (bomb-checked, high bit depths scaled); ImageError with the path on any failure."""
    from PIL import UnidentifiedImageError

    from qdebug.errors import ImageError
    from qdebug.input_files import require_file

    from .image_input import decode

    p = Path(path)
    require_file(p, "image", "PNG/JPEG/...", ImageError)
    try:
        return decode(p, str(p))
    except ImageError:
        raise
    except UnidentifiedImageError:
        raise ImageError(f"not an image: {p} (expected a PNG, JPEG or other format Pillow reads)") from None
    except Exception as exc:  # Pillow's decoders raise many kinds on hostile files (OSError, EOFError, struct.error...)
        raise ImageError(f"corrupt image: {p} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


def build_request(
    prompt: str,
    image_paths: Sequence[str | Path],
    *,
    max_new_tokens: int = 16,
    request_id: str = "0",
    images: list | None = None,
) -> Request:
    """A Request from a prompt and image files (opened here unless `images` are given): see `build_media_request`."""
    opened = images if images is not None else [load_image(p) for p in image_paths]
    names = [str(p) for p in image_paths] if image_paths else [f"<image {i}>" for i in range(len(opened))]
    return build_media_request(prompt, images=opened, image_paths=names, max_new_tokens=max_new_tokens, request_id=request_id)


def build_media_request(prompt: str, *, images: Sequence[Any] = (), image_paths: Sequence[str] = (), clips: Sequence[Any] = (),
                        videos: Sequence[Any] = (), video_paths: Sequence[str] = (), use_audio_in_video: bool = False,
                        max_new_tokens: int = 16, request_id: str = "0") -> Request:
    """The one request builder: images (opened), clips and videos (decoded), each kind at its `<marker>`s (one per
    item) or first. A marker of a kind the request carries no item of stays text (a prompt may mention `<video>`)."""
    counts = {kind: n for kind, n in (("image", len(images)), ("audio", len(clips)), ("video", len(videos))) if n}
    return Request(parts=media_parts(prompt, counts), images=list(images), image_paths=list(image_paths), max_new_tokens=max_new_tokens,
                   request_id=request_id, audios=list(clips), audio_paths=[c.source for c in clips], videos=list(videos),
                   video_paths=list(video_paths) or [v.source for v in videos], use_audio_in_video=use_audio_in_video)
