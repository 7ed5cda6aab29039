"""Requests: image loading errors and placeholder counting."""

import pytest

from qdebug.errors import ImageError, PlaceholderError
from qdebug.trace.request import build_request, load_image
from tests.conftest import scene


def test_image_errors(tmp_path):
    with pytest.raises(ImageError, match="not found"):
        load_image(tmp_path / "missing.png")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ImageError, match="not an image"):
        load_image(text)
    good = tmp_path / "good.png"
    scene(1).image.save(good)
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ImageError, match="corrupt image"):
        load_image(corrupt)
    with pytest.raises(ImageError, match="directory"):
        load_image(tmp_path)


def test_images_go_first_without_markers():
    img = scene(1).image
    r = build_request("Describe the image.", [], images=[img])
    assert r.parts == [("image", 0), ("text", "Describe the image.")]


def test_markers_place_images_and_must_match_count():
    a, b = scene(1).image, scene(2).image
    r = build_request("left <image> right <image>", [], images=[a, b])
    assert r.parts == [("text", "left "), ("image", 0), ("text", " right "), ("image", 1)]
    with pytest.raises(PlaceholderError, match="2 <image> placeholder"):
        build_request("<image><image>", [], images=[a])
    with pytest.raises(PlaceholderError, match="1 <image> placeholder"):
        build_request("<image> only one", [], images=[a, b])
