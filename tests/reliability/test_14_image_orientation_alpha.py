"""Issue 21 items 19 and 20: an EXIF-rotated photo is turned upright and a transparent image is composited onto white,
exactly as transformers' own `load_image` and the processor's `convert_to_rgb` do; the preprocess stage says so."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from qdebug.trace.image_input import notes
from qdebug.trace.request import load_image
from qdebug.trace.schema import load_trace

from .conftest import qdebug


def _exif_jpeg(path, orientation: int):
    pixels = np.zeros((40, 80, 3), np.uint8)
    pixels[:12, :24] = (255, 0, 0)  # red top-left of the stored (sideways) picture
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(path, exif=exif, quality=95)
    return path


def _transparent(path, mode: str):
    ramp = np.linspace(0, 255, 24).astype(np.uint8)[None, :].repeat(24, axis=0)
    colour = np.full((24, 24), 180, np.uint8)
    bands = [colour, ramp] if mode == "LA" else [colour, colour // 2, colour // 3, ramp]
    Image.fromarray(np.stack(bands, axis=-1), mode).save(path)
    return path


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_orientation_as_transformers_load_image(tmp_path, orientation):
    from transformers.image_utils import load_image as hf_load_image

    path = _exif_jpeg(tmp_path / "photo.jpg", orientation)
    ours, theirs = load_image(path), hf_load_image(str(path))
    assert ours.size == theirs.size == ((40, 80) if orientation != 3 else (80, 40))
    assert np.array_equal(np.asarray(ours), np.asarray(theirs))
    assert any(f"EXIF orientation {orientation} applied" in n for n in notes(ours))


@pytest.mark.parametrize("mode", ["RGBA", "LA"])
def test_transparency_as_the_processor_converts_it(tmp_path, mode):
    from transformers.image_transforms import convert_to_rgb

    from qdebug.demo.build import build_processor

    path = _transparent(tmp_path / "t.png", mode)
    ours = load_image(path)
    with Image.open(path) as original:
        original.load()
        assert np.array_equal(np.asarray(ours), convert_to_rgb(original, return_numpy=True))
        processor = build_processor().image_processor
        direct = processor(images=[original], return_tensors="pt")["pixel_values"]
    via_qdebug = processor(images=[ours], return_tensors="pt")["pixel_values"]
    assert np.array_equal(direct.numpy(), via_qdebug.numpy())  # what the model's own path gives
    assert any("composited onto white" in n for n in notes(ours))


def test_preprocess_stage_names_the_orientation(tmp_path):
    photo = _exif_jpeg(tmp_path / "photo.jpg", 6)
    proc = qdebug("attn", photo, "Describe.", "--save", tmp_path / "t.qdt", "--max-new-tokens", "1")
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(tmp_path / "t.qdt")
    summary = trace.stages["preprocess"].summary.to_json()
    assert any("EXIF orientation 6 applied" in n and "photo.jpg" in n for n in summary["image_notes"]), summary
    assert tuple(trace.images[0].size) == (40, 80)  # upright: the stored picture is 80 wide, 40 high
