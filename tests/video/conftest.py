"""Videos on disk (a frame folder, an MP4 written with PyAV) and the three Qwen-VL families, for the video tests.

The demo model was never trained on video and the family checkpoints are random: the tests check structure and
positions (spans, rows, temporal ids against the model's own code), never what a model says about a video."""

from __future__ import annotations

import pytest

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
COLOURS = ((220, 40, 40), (220, 40, 40), (40, 40, 220), (40, 40, 220))  # two temporal slices of two frames each


def frame(colour, size=(112, 84)):
    """A flat frame with a white square whose place differs by colour (so slices differ)."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", size, colour)
    x = 8 if colour[0] > colour[2] else size[0] - 40
    ImageDraw.Draw(im).rectangle([x, 8, x + 30, 38], fill=(255, 255, 255))
    return im


def write_frames(folder, colours=COLOURS, size=(112, 84)):
    """One PNG per frame, named so that name order is frame order."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(colours):
        frame(c, size).save(folder / f"frame_{i:03d}.png")
    return folder


def write_mp4(path, frames: int = 8, rate: int = 4, size=(112, 84)):
    """An MP4 (MPEG-4 part 2, so no x264 is needed) of `frames` frames at `rate` fps, written with PyAV."""
    import av
    import numpy as np

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=rate)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for i in range(frames):
            colour = COLOURS[(i * len(COLOURS)) // frames]
            vf = av.VideoFrame.from_ndarray(np.asarray(frame(colour, size)), format="rgb24")
            for packet in stream.encode(vf):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.fixture(scope="session")
def frames_dir(tmp_path_factory):
    """Four 112×84 frames: two of one scene, two of another."""
    return write_frames(tmp_path_factory.mktemp("video") / "frames")


@pytest.fixture(scope="session")
def mp4(tmp_path_factory):
    """Eight frames at 4 fps as an MP4."""
    return write_mp4(tmp_path_factory.mktemp("video") / "clip.mp4")


_dirs: dict = {}
_models: dict = {}


@pytest.fixture(scope="session")
def family_spec(tmp_path_factory):
    """family name → a `--model` spec: the demo for Qwen2-VL, tiny random checkpoints for the others (built once)."""
    from tests.families.build import BUILDERS

    def get(name: str) -> str:
        if name == "qwen2_vl":
            return "demo"
        if name not in _dirs:
            _dirs[name] = BUILDERS[name](tmp_path_factory.mktemp(name))
        return str(_dirs[name])

    return get


@pytest.fixture(scope="session")
def vl_model(family_spec):
    """family name → that model loaded (float32, CPU, sdpa with qdebug's kernel), once per session."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model

    quiet_transformers()

    def get(name: str):
        if name not in _models:
            _models[name] = load_model(family_spec(name), "cpu", "float32")
        return _models[name]

    return get
