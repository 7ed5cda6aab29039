"""Audio on the command line: which arguments are clips (by content), the request they make, the model's modality."""

from __future__ import annotations

from pathlib import Path

from qdebug.errors import InputError


def split_media(paths: list[Path], audio: list[Path]) -> tuple[list[Path], list[Path]]:
    """(images, clips): positional media files whose content is audio become clips, after them the --audio ones."""
    from qdebug.trace.audio import is_audio_file

    images = [p for p in paths if not is_audio_file(p)]
    clips = [p for p in paths if is_audio_file(p)] + list(audio or [])
    if images and clips:
        raise InputError(
            f"got image(s) {', '.join(map(str, images))} and audio clip(s) {', '.join(map(str, clips))}; "
            "expected one kind per request (no supported family takes both)"
        )
    return images, clips


def audio_request(prompt: str, images: list[Path], clips: list[Path], max_new_tokens: int):
    """Decode each clip (fail fast, before loading a model) and build the request."""
    from qdebug.trace.audio import build_audio_request, load_audio

    return build_audio_request(prompt, [load_audio(p) for p in clips], max_new_tokens=max_new_tokens)


def check_modality(spec: str, request) -> None:
    """An audio request needs an audio model, an image request an image model: say which was given (from config.json,
    before any weights load)."""
    from qdebug.model.adapters import adapter_for
    from qdebug.model.load import read_config, resolve_model_dir

    adapter = adapter_for(read_config(resolve_model_dir(spec)), where=f"--model {spec}")
    has = "audio" if request.audios else "image"
    if adapter.modality != has:
        what = "audio clip(s)" if has == "audio" else "image(s)"
        raise InputError(f"--model {spec} ({adapter.name}) takes {adapter.modality} input but {what} were given")


def audio_order_requests(clip_path: str, prompt: str, order: str, max_new_tokens: int) -> list[tuple[str, object]]:
    """(order label, request) for `diff CLIP PROMPT --order audio-first|text-first|both` (image-first = audio-first)."""
    from qdebug.trace.audio import AUDIO_MARKER, build_audio_request, load_audio

    clip = load_audio(clip_path)
    orders = ["audio-first", "text-first"] if order == "both" else ["audio-first" if order == "image-first" else order]
    out = []
    for name in orders:
        text = prompt if name == "audio-first" or AUDIO_MARKER in prompt else prompt + AUDIO_MARKER
        out.append((name, build_audio_request(text, [clip], max_new_tokens=max_new_tokens)))
    return out
