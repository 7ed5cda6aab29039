"""What `qdebug diff` compares: saved traces, or the request(s) an IMAGE/VIDEO/CLIP and PROMPT make, one per order.

Shared by `diff` and its `--engine` and `--onnx` forms (`engine_diff.py`, `onnx_diff.py`), so none imports another.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.errors import InputError

from .diff_args import DiffArgs

if TYPE_CHECKING:
    from qdebug.trace.request import Request

ORDERS = ("image-first", "text-first", "both", "audio-first")


def is_trace_file(path: str) -> bool:
    """Whether an argument names a saved trace (a .qdt zip)."""
    import zipfile

    p = Path(path)
    return p.suffix == ".qdt" or (p.is_file() and zipfile.is_zipfile(p))


def diff_requests(args: DiffArgs) -> list[tuple[str, Request]]:
    """(order, Request) for each order `--order` asks for: an audio clip, video(s) or image(s) with the prompt, checked
    against the model and decoded once (`media_input.py`); text-first puts each kind's markers after the prompt."""
    from qdebug.commands.media_input import model_media, read_media, sort_media
    from qdebug.trace.markers import AUDIO_MARKER, IMAGE_MARKER, VIDEO_MARKER

    if args.order not in ORDERS:
        raise InputError(f"--order {args.order}: expected one of {', '.join(ORDERS)}")
    media = sort_media([Path(args.first), *map(Path, args.images)])
    first = "audio" if Path(args.first) in media.clips else "video" if Path(args.first) in media.videos else "image"
    if first == "audio":  # a clip, found by content: the 004 check (audio-first | text-first | both; image-first = audio-first)
        order = "audio-first" if args.order == "image-first" else args.order
        orders = ["audio-first", "text-first"] if order == "both" else [order]
    elif args.order == "audio-first":
        what = "is a video; expected image-first, text-first or both" if first == "video" else \
            "is not an audio clip; expected image-first, text-first or both for an image"
        raise InputError(f"--order audio-first: {args.first} {what}")
    else:
        orders = ["image-first", "text-first"] if args.order == "both" else [args.order]
    intake = read_media(model_media(args.spec), media, fps=args.fps, max_frames=args.max_frames)
    counts = {IMAGE_MARKER: len(media.images), AUDIO_MARKER: len(media.clips), VIDEO_MARKER: len(media.videos)}
    out: list[tuple[str, Request]] = []
    for order in orders:
        prompt = args.second
        if order == "text-first":
            prompt += "".join(marker * n for marker, n in counts.items() if marker not in args.second)
        out.append((order, intake.request(prompt, args.max_new_tokens)))
    return out
