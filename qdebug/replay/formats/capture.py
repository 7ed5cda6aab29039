"""Parse a JSONL capture of OpenAI-style chat-completions requests into a Batch of Requests."""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import os
import re
from pathlib import Path
from urllib.parse import unquote

from qdebug.errors import ImageError, ReplayFormatError, cause, first_line
from qdebug.input_files import refuse_special
from qdebug.replay.batch import Batch, BatchRequest
from qdebug.trace.image_input import decode
from qdebug.trace.request import Request, load_image

from .content import MEDIA_KIND

DEFAULT_MAX_NEW_TOKENS = 16

_DATA_URL_RE = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),(.*)", re.S)
_SCHEME_RE = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*)://")


class _LineError(Exception):
    """Why one capture line cannot become a request (the line is kept as an error, parsing goes on)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = " ".join(reason.splitlines())


def _decode_data_url(url: str) -> tuple[object, str]:
    """A data: URL as an RGB image and a label like `data:image/png (1234 bytes)`."""
    m = _DATA_URL_RE.fullmatch(url)
    if m is None:
        raise _LineError("malformed data: URL (expected data:image/...;base64,...)")
    mime, params, payload = m.group(1) or "image", m.group(2), m.group(3)
    if ";base64" not in params.lower():
        raise _LineError(f"data: URL for {mime} is not base64 (expected data:image/...;base64,...)")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _LineError(f"bad base64 in data: URL ({cause(exc)})") from None
    if not data:
        raise _LineError("empty data: URL (no image bytes)")
    from PIL import UnidentifiedImageError

    try:
        image = decode(io.BytesIO(data), f"data: URL ({len(data)} bytes)")
    except ImageError as exc:
        raise _LineError(exc.message) from None
    except UnidentifiedImageError:
        raise _LineError(f"data: URL ({len(data)} bytes) is not an image Pillow reads") from None
    except Exception as exc:  # Pillow raises many kinds (OSError, SyntaxError, DecompressionBombError...)
        raise _LineError(f"corrupt image in data: URL ({first_line(exc)})") from None
    return image, f"data:{mime} ({len(data)} bytes)"


def _load_path(ref: str, base: Path, allow_paths: bool) -> object:
    """The image file `ref` names, relative to the capture's folder and kept inside it unless allowed."""
    target = (base / ref).resolve()
    if not allow_paths and not target.is_relative_to(base):
        raise _LineError(
            f"image path {ref} escapes the capture's folder {base} (pass --allow-paths to read images outside it)"
        )
    try:
        return load_image(target)
    except ImageError as exc:
        raise _LineError(exc.message) from None


def _load_image_url(url: object, base: Path, allow_paths: bool) -> tuple[object, str]:
    """An image_url value (data:, relative path or file://) as an RGB image and its label."""
    if not isinstance(url, str) or not url.strip():
        raise _LineError("image_url has no URL (expected a data: URL or a relative path)")
    url = url.strip()
    if url[:5].lower() == "data:":
        return _decode_data_url(url)
    m = _SCHEME_RE.match(url)
    if m is not None:
        scheme = m.group(1).lower()
        if scheme in ("http", "https"):
            raise _LineError(
                f"remote image URLs are not fetched; embed as data: URL or a relative path ({url[:120]})"
            )
        if scheme != "file":
            raise _LineError(f"unsupported image URL scheme {scheme}:// (expected data: or a relative path)")
        ref = unquote(url[m.end() :])
        if ref.startswith("localhost/"):
            ref = ref[len("localhost") :]
    else:
        ref = url
    return _load_path(ref, base, allow_paths), ref


def _user_parts(messages: object, base: Path, allow_paths: bool, audios: list | None = None,
                videos: list | None = None) -> tuple[list, list, list]:
    """Parts, images and labels of all user messages, in order; `input_audio` clips are appended to `audios`,
    `video_url` videos (Video, label) to `videos`."""
    if not isinstance(messages, list) or not messages:
        raise _LineError('no messages (expected a non-empty "messages" list)')
    parts: list[tuple[str, object]] = []
    images: list = []
    labels: list[str] = []
    users = 0
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise _LineError(f"message {i} is not an object")
        if msg.get("role") != "user":
            continue  # system/assistant turns do not reach the visual path being debugged
        users += 1
        content = msg.get("content")
        items = [content] if isinstance(content, str) else content
        if not isinstance(items, list):
            raise _LineError(f"message {i} content must be a string or a list of parts")
        for part in items:
            if isinstance(part, str):
                part = {"type": "text", "text": part}
            if not isinstance(part, dict):
                raise _LineError(f"message {i} has a content part that is not an object")
            kind = part.get("type")
            media = MEDIA_KIND.get(kind) if isinstance(kind, str) else None  # a list or object is no type (and no key)
            if kind == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise _LineError(f"message {i} has a text part without a string text")
                if text:
                    parts.append(("text", text))
            elif media == "image":
                ref = part.get(kind)
                url = ref.get("url") if isinstance(ref, dict) else ref
                image, label = _load_image_url(url, base, allow_paths)
                parts.append(("image", len(images)))
                images.append(image)
                labels.append(label)
            elif media == "audio" and audios is not None:
                from qdebug.trace.audio import AudioError, decode_input_audio

                try:
                    clip = decode_input_audio(part.get(kind), f"message {i}")
                except AudioError as exc:
                    raise _LineError(exc.message) from None
                parts.append(("audio", len(audios)))
                audios.append(clip)
            elif media == "video" and videos is not None:
                from .capture_video import load_video_url

                ref = part.get(kind)
                parts.append(("video", len(videos)))
                videos.append(load_video_url(ref.get("url") if isinstance(ref, dict) else ref, base, allow_paths, _LineError))
            else:
                raise _LineError(f"unsupported content part type {kind!r} (expected text, image_url, video_url or input_audio)")
    if users == 0:
        raise _LineError("no user message")
    if not parts:
        raise _LineError("no image and no text in the user messages")
    if videos and (images or audios):
        raise _LineError("video_url with image_url or input_audio in one request (expected videos only: a video request is traced alone)")
    return parts, images, labels


def _request_id(value: object, line: int) -> str:
    """The line's id as a string (its line number when absent)."""
    if value is None or value == "":
        return str(line)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _LineError(f"id must be a string or a number, got {type(value).__name__}")
    return str(value)


def _optional_fields(obj: dict) -> tuple[float | None, str | None, str | None, int]:
    """arrival_ts, observed, model and max new tokens, each checked."""
    ts = obj.get("arrival_ts")
    if ts is not None:
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            raise _LineError(f"arrival_ts must be a finite number of seconds, got {ts!r}"[:200])
        ts = float(ts)
    observed = obj.get("observed")
    if observed is not None and not isinstance(observed, str):
        raise _LineError(f"observed must be a string, got {type(observed).__name__}")
    model = obj.get("model")
    model = None if model is None else str(model)
    max_new = obj.get("max_completion_tokens", obj.get("max_tokens"))
    if max_new is None:
        max_new = DEFAULT_MAX_NEW_TOKENS
    elif isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise _LineError(f"max_tokens must be a positive integer, got {max_new!r}"[:200])
    return ts, observed, model, max_new


def _parse_line(text: str, line: int, base: Path, allow_paths: bool) -> BatchRequest:
    """One capture line as a BatchRequest: a Request, or an error naming why not."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = f"bad JSON ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else "bad JSON"
        return BatchRequest(request_id=str(line), line=line, error=reason)
    if not isinstance(obj, dict):
        return BatchRequest(request_id=str(line), line=line, error=f"not a JSON object (got {type(obj).__name__})")
    rid = str(line)
    try:
        rid = _request_id(obj.get("id"), line)
        ts, observed, model, max_new = _optional_fields(obj)
        audios: list = []
        videos: list = []
        parts, images, labels = _user_parts(obj.get("messages"), base, allow_paths, audios, videos)
    except _LineError as exc:
        return BatchRequest(request_id=rid, line=line, error=exc.reason)
    request = Request(parts=parts, images=images, image_paths=labels, max_new_tokens=max_new, request_id=rid,
                      audios=audios, audio_paths=[f"input_audio#{line}.{k}" for k in range(len(audios))],
                      videos=[v for v, _ in videos], video_paths=[label for _, label in videos])
    labels = labels or [label for _, label in videos]  # the batch's label for a video request: its video
    if labels:
        first = f"data#{line}" if labels[0].startswith("data:") else Path(labels[0]).name
        label = first if len(labels) == 1 else f"{first} +{len(labels) - 1}"
    else:
        label = None
    return BatchRequest(
        request_id=rid, line=line, request=request, model_name=model,
        arrival_ts=ts, observed=observed, image_label=label,
    )


def parse_capture(path: str | os.PathLike, allow_paths: bool = False) -> Batch:
    """Parse a JSONL capture; broken lines become error entries and parsing continues."""
    p = Path(path)
    if not p.exists():
        raise ReplayFormatError(f"capture not found: {p} (expected an existing JSONL file)")
    if p.is_dir():
        raise ReplayFormatError(f"capture is a directory: {p} (expected a JSONL file)")
    refuse_special(p, "capture", "a JSONL file", ReplayFormatError)  # /dev/zero has no end and no newline
    base = p.absolute().parent.resolve()
    batch = Batch(source=str(p), kind="capture")
    used: set[str] = set()
    line = 0
    try:
        with open(p, "rb") as f:
            for line, raw in enumerate(f, 1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    entry = BatchRequest(request_id=str(line), line=line, error=f"not UTF-8 text ({exc.reason})")
                else:
                    if line == 1:
                        text = text.lstrip("\ufeff")
                    if not text.strip():
                        continue
                    entry = _parse_line(text, line, base, allow_paths)
                if entry.request_id in used:
                    # Keep both requests; the suffix keeps ids usable as keys in reports.
                    unique = f"{entry.request_id}#{line}"
                    while unique in used:
                        unique += f"#{line}"
                    entry.request_id = unique
                    if entry.request is not None:
                        entry.request.request_id = unique
                used.add(entry.request_id)
                batch.requests.append(entry)
    except OSError as exc:
        raise ReplayFormatError(f"cannot read capture {p}: {exc.strerror or exc} (expected a readable file)") from None
    batch.total_lines = line
    return batch
