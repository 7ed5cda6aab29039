"""A capture's `video_url` part: a data: URL (a video file, or vLLM's comma-separated JPEG frames) or a path (a video file
or a frame folder), with the same path rules as images (inside the capture's folder unless --allow-paths)."""

from __future__ import annotations

import base64
import binascii
import io
import re
from pathlib import Path
from urllib.parse import unquote

from qdebug.errors import InputError

from .content import CAPTURED_URL

_DATA_URL_RE = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),(.*)", re.S)
_SCHEME_RE = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*)://")


def load_video_url(url: object, base: Path, allow_paths: bool, line_error: type[Exception]):
    """(Video, label) of a video_url value; `line_error(reason)` is raised on a bad one."""
    if not isinstance(url, str) or not url.strip():
        raise line_error("video_url has no URL (expected a data: URL or a relative path)")
    url = url.strip()
    try:
        if url[:5].lower() == "data:":
            video, label = _data_url(url, line_error)
            setattr(video, CAPTURED_URL, url)  # a replay against a server sends the bytes captured, not a re-encoding
            return video, label
        m = _SCHEME_RE.match(url)
        ref = url
        if m is not None:
            scheme = m.group(1).lower()
            if scheme in ("http", "https"):
                raise line_error(f"remote video URLs are not fetched; embed as data: URL or a relative path ({url[:120]})")
            if scheme != "file":
                raise line_error(f"unsupported video URL scheme {scheme}:// (expected data: or a relative path)")
            ref = unquote(url[m.end():])
            ref = ref[len("localhost"):] if ref.startswith("localhost/") else ref
        target = (base / ref).resolve()
        if not allow_paths and not target.is_relative_to(base):
            raise line_error(f"video path {ref} escapes the capture's folder {base} (pass --allow-paths to read videos outside it)")
        from qdebug.trace.video_input import load_video

        return load_video(target), ref
    except InputError as exc:  # VideoError, ImageError of a frame
        raise line_error(exc.message) from None


def _data_url(url: str, line_error):
    """data:video/mp4;base64,... (a file) or data:video/jpeg;base64,F1,F2,... (frames, as vLLM takes them)."""
    from qdebug.trace.video_input import decode_video_bytes, frames_video

    m = _DATA_URL_RE.fullmatch(url)
    if m is None or ";base64" not in (m.group(2) or "").lower():
        raise line_error("malformed video data: URL (expected data:video/...;base64,...)")
    mime, chunks = m.group(1) or "video", m.group(3).split(",")
    try:
        blobs = [base64.b64decode(c, validate=True) for c in chunks]
    except (binascii.Error, ValueError) as exc:
        raise line_error(f"bad base64 in video data: URL ({exc})") from None
    if not any(blobs):
        raise line_error("empty video data: URL (no bytes)")
    label = f"data:{mime} ({sum(map(len, blobs))} bytes)"
    if mime.lower() in ("video/jpeg", "video/png") or len(blobs) > 1:  # one image per frame
        from qdebug.trace.image_input import decode

        frames = []
        for k, blob in enumerate(blobs):
            try:
                frames.append(decode(io.BytesIO(blob), f"{label} frame {k}"))
            except InputError:
                raise
            except Exception as exc:  # Pillow's many kinds on a frame that is not an image
                raise line_error(f"{label} frame {k} is not an image Pillow reads ({type(exc).__name__})") from None
        return frames_video(frames, label), label
    return decode_video_bytes(blobs[0], label), label
