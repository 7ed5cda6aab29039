"""Media on the command line, one intake for every family: which arguments are images, clips or videos (by content),
whether the model takes them (from config.json, before any weights load), decoded, and the one request they make."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.errors import InputError

if TYPE_CHECKING:
    from qdebug.trace.request import Request

NOUNS = {"image": "image(s)", "audio": "audio clip(s)", "video": "video(s)"}


@dataclass(frozen=True)
class ModelMedia:
    """What a model spec takes, read once from its config.json: its adapter's name, modalities, and whether several
    kinds go in one request (Qwen2.5-Omni)."""

    spec: str
    name: str
    takes: frozenset[str]
    mixed: bool

    def check(self, kinds: set[str]) -> None:
        """InputError naming the first kind of media given that this model has no placeholder for."""
        for kind in ("image", "audio", "video"):
            if kind in kinds and kind not in self.takes:
                if kind == "video":
                    raise InputError(f"--model {self.spec} ({self.name}) has no video placeholder (no video_token_id in config.json); "
                                     "expected a Qwen-VL model (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) for a video")
                takes = " or ".join(sorted(self.takes - {"video"})) or "no media"
                raise InputError(f"--model {self.spec} ({self.name}) takes {takes} input but {NOUNS[kind]} were given")


def model_media(spec: str) -> ModelMedia:
    """The model's media facts, from config.json (its adapter's modality; video where it has a video placeholder)."""
    from qdebug.model.adapters import adapter_for
    from qdebug.model.load import read_config, resolve_model_dir

    config = read_config(resolve_model_dir(spec))
    adapter = adapter_for(config, where=f"--model {spec}")
    if adapter.mixed_media:
        takes = {"image", "audio", "video"}
    else:
        takes = {adapter.modality} | ({"video"} if adapter.modality == "image" and isinstance(config.get("video_token_id"), int) else set())
    return ModelMedia(spec, adapter.name, frozenset(takes), adapter.mixed_media)


@dataclass
class MediaPaths:
    """The command line's media files by kind, in the order they were given."""

    images: list[Path] = field(default_factory=list)
    clips: list[Path] = field(default_factory=list)
    videos: list[Path] = field(default_factory=list)

    @property
    def kinds(self) -> set[str]:
        """The kinds present."""
        return {k for k, v in (("image", self.images), ("audio", self.clips), ("video", self.videos)) if v}


def sort_media(paths: list[Path], audio: list[Path] | None = None, videos: list[Path] | None = None) -> MediaPaths:
    """Positional files by content (a clip, a frame folder or video file, else an image), then --audio and --video."""
    from qdebug.trace.audio import is_audio_file
    from qdebug.trace.video_input import is_video_source

    clips = [p for p in paths if is_audio_file(p)]
    found = [p for p in paths if p not in clips and is_video_source(p)]
    images = [p for p in paths if p not in clips and p not in found]
    return MediaPaths(images, clips + list(audio or []), found + list(videos or []))


def one_kind(media: MediaPaths) -> None:
    """A model that is not Qwen2.5-Omni takes one kind per request: InputError naming both kinds given."""
    if media.images and media.clips:
        raise InputError(f"got image(s) {', '.join(map(str, media.images))} and audio clip(s) {', '.join(map(str, media.clips))}; "
                         "expected one kind per request (no supported family takes both)")
    if media.videos and (media.images or media.clips):
        rest = media.images + media.clips
        raise InputError(f"got video(s) {', '.join(map(str, media.videos))} and other media {', '.join(map(str, rest))}; "
                         "expected videos only in a video request (images with a video are not traced yet)")


@dataclass
class Intake:
    """A command line's media, checked against the model and decoded once: the requests they make with a prompt, and
    what the outputs draw from (the opened images, the sampled videos)."""

    images: list
    image_paths: list[str]
    clips: list
    videos: list
    video_paths: list[str]
    use_audio_in_video: bool = False

    def request(self, prompt: str, max_new_tokens: int) -> Request:
        """The request these items make with `prompt` (each kind at its markers, or first)."""
        from qdebug.trace.request import build_media_request

        return build_media_request(prompt, images=self.images, image_paths=self.image_paths, clips=self.clips, videos=self.videos,
                                   video_paths=self.video_paths, use_audio_in_video=self.use_audio_in_video, max_new_tokens=max_new_tokens)


def read_media(model: ModelMedia, media: MediaPaths, *, fps: float | None = None, max_frames: int | None = None,
               use_audio_in_video: bool = False) -> Intake:
    """Decode every item and check the kinds against the model (failing fast, before any weights load)."""
    from qdebug.trace.audio import load_audio
    from qdebug.trace.request import load_image
    from qdebug.trace.video_input import MAX_FRAMES, load_video

    if use_audio_in_video and not model.mixed:
        raise InputError(f"--use-audio-in-video: --model {model.spec} does not take a video's sound (expected Qwen2.5-Omni)")
    if use_audio_in_video and not media.videos:
        raise InputError("--use-audio-in-video: no video was given (expected a video file with sound)")
    if not model.mixed:
        one_kind(media)
    opened = [load_image(p) for p in media.images]  # a corrupt file is named before the model's kinds are
    clips = [load_audio(p) for p in media.clips]
    decoded = [load_video(p, fps=fps, max_frames=max_frames or MAX_FRAMES) for p in media.videos]
    model.check(media.kinds)
    if use_audio_in_video:
        from qdebug.trace.video_audio import audio_track

        for path, video in zip(media.videos, decoded):
            video.audio = audio_track(path)
            if video.audio is None:
                raise InputError(f"--use-audio-in-video: {path} has no audio track (expected a video file with sound)")
    return Intake(opened, [str(p) for p in media.images], clips, decoded, [str(p) for p in media.videos],
                  use_audio_in_video)
