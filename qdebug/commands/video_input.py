"""Video on the command line: which arguments are videos (a folder, or a file by content), the request, the model's check."""

from __future__ import annotations

from pathlib import Path

from qdebug.errors import InputError


def split_videos(paths: list[Path], videos: list[Path]) -> tuple[list[Path], list[Path]]:
    """(other media, videos): positional folders and video files become videos, after them the --video ones."""
    from qdebug.trace.video_input import is_video_source

    found = [p for p in paths if is_video_source(p)]
    rest = [p for p in paths if not is_video_source(p)]
    out = found + list(videos or [])
    if out and rest:
        raise InputError(f"got video(s) {', '.join(map(str, out))} and other media {', '.join(map(str, rest))}; "
                         "expected videos only in a video request (images with a video are not traced yet)")
    return rest, out


def video_request(prompt: str, videos: list[Path], max_new_tokens: int, fps: float | None, max_frames: int | None):
    """Decode and sample each video (fail fast, before loading a model) and build the request."""
    from qdebug.trace.video_input import MAX_FRAMES, build_video_request, load_video

    loaded = [load_video(p, fps=fps, max_frames=max_frames or MAX_FRAMES) for p in videos]
    return build_video_request(prompt, loaded, max_new_tokens=max_new_tokens)


def check_video_model(spec: str) -> None:
    """A video needs a model with a `<|video_pad|>` placeholder: said from config.json, before any weights load."""
    from qdebug.model.adapters import adapter_for
    from qdebug.model.load import read_config, resolve_model_dir

    config = read_config(resolve_model_dir(spec))
    adapter = adapter_for(config, where=f"--model {spec}")
    if adapter.modality != "image" or not isinstance(config.get("video_token_id"), int):
        raise InputError(f"--model {spec} ({adapter.name}) has no video placeholder (no video_token_id in config.json); "
                         "expected a Qwen-VL model (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) for a video")
