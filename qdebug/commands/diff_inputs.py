"""What `qdebug diff` compares: saved traces, or the request(s) an IMAGE/VIDEO/CLIP and PROMPT make, one per order.

Shared by `diff` and its `--engine` and `--onnx` forms (`engine_diff.py`, `onnx_diff.py`), so none imports another.
"""

from __future__ import annotations

from pathlib import Path

from qdebug.errors import InputError

from .diff_args import DiffArgs

ORDERS = ("image-first", "text-first", "both", "audio-first")


def is_trace_file(path: str) -> bool:
    """Whether an argument names a saved trace (a .qdt zip)."""
    import zipfile

    p = Path(path)
    return p.suffix == ".qdt" or (p.is_file() and zipfile.is_zipfile(p))


def diff_requests(args: DiffArgs) -> list[tuple[str, object]]:
    """(order, Request) for each order `--order` asks for: an audio clip, a video or image(s) with the prompt."""
    from qdebug.trace.audio import is_audio_file
    from qdebug.trace.request import IMAGE_MARKER, build_request, load_image

    if args.order not in ORDERS:
        raise InputError(f"--order {args.order}: expected one of {', '.join(ORDERS)}")
    if is_audio_file(args.first):  # a clip, found by content: the 004 check (audio-first | text-first | both)
        from qdebug.commands.audio_input import audio_order_requests

        return audio_order_requests(args.first, args.second, args.order, args.max_new_tokens)
    from qdebug.trace.video_input import is_video_source

    if is_video_source(args.first):  # a frame folder or a video file: video first, or where `<video>` stands
        return _video_requests(args)
    if args.order == "audio-first":
        raise InputError(f"--order audio-first: {args.first} is not an audio clip; expected image-first, text-first or both for an image")
    paths = [args.first, *args.images]
    images = [load_image(p) for p in paths]
    orders = ["image-first", "text-first"] if args.order == "both" else [args.order]
    out = []
    for order in orders:
        prompt = args.second if order == "image-first" or IMAGE_MARKER in args.second else args.second + IMAGE_MARKER * len(paths)
        out.append((order, build_request(prompt, paths, images=images, max_new_tokens=args.max_new_tokens)))
    return out


def _video_requests(args: DiffArgs):
    """(order, request) for `diff VIDEO PROMPT`: the video first (image-first) and/or after the text (text-first)."""
    from qdebug.commands.video_input import check_video_model, split_videos, video_request
    from qdebug.trace.video_input import VIDEO_MARKER

    if args.order == "audio-first":
        raise InputError(f"--order audio-first: {args.first} is a video; expected image-first, text-first or both")
    from qdebug.commands.media_input import media_request, mixed_media_model

    mixed = mixed_media_model(args.model)  # Qwen2.5-Omni: its video placeholder is the thinker's, each item at its own encoder
    if not mixed:
        check_video_model(args.model)
    _, videos = split_videos([Path(args.first), *map(Path, args.images)], [])
    orders = ["image-first", "text-first"] if args.order == "both" else [args.order]
    out = []
    for order in orders:
        prompt = args.second if order == "image-first" or VIDEO_MARKER in args.second else args.second + VIDEO_MARKER * len(videos)
        if mixed:
            out.append((order, media_request(prompt, [], [], videos, fps=args.fps, max_frames=args.max_frames, use_audio_in_video=False,
                                             max_new_tokens=args.max_new_tokens)[0]))
        else:
            out.append((order, video_request(prompt, videos, args.max_new_tokens, args.fps, args.max_frames)))
    return out
