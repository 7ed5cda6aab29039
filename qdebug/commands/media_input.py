"""Several modalities in one request on the command line (Qwen2.5-Omni): which arguments are what, and the request."""

from __future__ import annotations

from pathlib import Path

from qdebug.errors import InputError


def mixed_media_model(spec: str) -> bool:
    """Whether the model takes several modalities in one request (from config.json, before any weights load)."""
    from qdebug.model.adapters import adapter_for
    from qdebug.model.load import read_config, resolve_model_dir

    return adapter_for(read_config(resolve_model_dir(spec)), where=f"--model {spec}").mixed_media


def media_request(prompt: str, paths: list[Path], audio: list[Path], videos: list[Path], *, fps: float | None,
                  max_frames: int | None, use_audio_in_video: bool, max_new_tokens: int):
    """Sort the positional media by content (clips, videos, else images), add --audio/--video, decode everything
    (fail fast, before loading a model) and build the request; (request, opened images, decoded videos)."""
    from qdebug.trace.audio import is_audio_file, load_audio
    from qdebug.trace.media_request import build_media_request
    from qdebug.trace.request import load_image
    from qdebug.trace.video_audio import audio_track
    from qdebug.trace.video_input import MAX_FRAMES, is_video_source, load_video

    clips = [p for p in paths if is_audio_file(p)] + list(audio or [])
    video_paths = [p for p in paths if not is_audio_file(p) and is_video_source(p)] + list(videos or [])
    images = [p for p in paths if not is_audio_file(p) and not is_video_source(p)]
    if use_audio_in_video and not video_paths:
        raise InputError("--use-audio-in-video: no video was given (expected a video file with sound)")
    opened = [load_image(p) for p in images]
    decoded = [load_video(p, fps=fps, max_frames=max_frames or MAX_FRAMES) for p in video_paths]
    if use_audio_in_video:
        for path, video in zip(video_paths, decoded):
            video.audio = audio_track(path)
            if video.audio is None:
                raise InputError(f"--use-audio-in-video: {path} has no audio track (expected a video file with sound)")
    request = build_media_request(prompt, images=opened, image_paths=[str(p) for p in images], clips=[load_audio(p) for p in clips],
                                  videos=decoded, video_paths=[str(p) for p in video_paths], use_audio_in_video=use_audio_in_video,
                                  max_new_tokens=max_new_tokens)
    return request, opened, decoded
