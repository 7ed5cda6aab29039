"""Item 8: 16-bit images are scaled to 8 bits (not clipped to white); an image of one flat colour is a finding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageStat

from qdebug.trace.request import load_image

from .conftest import qdebug


def test_16_bit_grey_png_keeps_its_contrast(tmp_path):
    arr = np.full((112, 112), 20000, np.uint16)
    arr[20:60, 30:80] = 60000
    path = tmp_path / "g16.png"
    Image.fromarray(arr).save(path)
    assert Image.open(path).mode.startswith("I")
    im = load_image(path)
    assert im.mode == "RGB"
    (lo, hi), *_ = im.getextrema()
    assert (lo, hi) == (round(20000 / 65535 * 255), round(60000 / 65535 * 255))  # 78, 233: scaled, not 255 everywhere


def test_16_bit_gradient_is_not_white(tmp_path):
    arr = np.linspace(0, 65535, 128 * 128).reshape(128, 128).astype(np.uint16)
    path = tmp_path / "grad16.png"
    Image.fromarray(arr).save(path)
    mean = ImageStat.Stat(load_image(path)).mean[0]
    assert 120 < mean < 135  # clipping gave ~254


@pytest.mark.parametrize("value", [0.25, 0.75])
def test_float_images_in_unit_range_are_scaled(tmp_path, value):
    path = tmp_path / "f.tiff"
    arr = np.full((56, 56), value, np.float32)
    arr[:10, :10] = 0.0
    Image.fromarray(arr).save(path)
    (lo, hi), *_ = load_image(path).getextrema()
    assert (lo, hi) == (0, round(value * 255))


def test_flat_image_is_a_warning_finding(tmp_path):
    path = tmp_path / "flat16.png"
    Image.fromarray(np.full((112, 112), 40000, np.uint16)).save(path)
    proc = qdebug("attn", path, "Describe the image.", "--device", "cpu", "--max-new-tokens", "2", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    flat = [f for f in findings if f["kind"] == "flat_image"]
    assert len(flat) == 1 and flat[0]["severity"] == "warning"
    assert "flat image" in flat[0]["message"] and "(156, 156, 156)" in flat[0]["message"] and "flat16.png" in flat[0]["message"]


def test_an_image_with_content_has_no_flat_finding(demo_trace):
    trace, _ = demo_trace
    assert not [f for f in trace.findings if f.kind == "flat_image"]
