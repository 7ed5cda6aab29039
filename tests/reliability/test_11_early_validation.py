"""Item 11: --layer/--head/--token, head-first layers and impossible aspect ratios fail from config and inputs alone.

The model folder here holds only the demo's config.json (no weights): reaching the weights would fail with exit 3,
so an exit 2 naming the option shows the check ran before any weights were loaded.
"""

from __future__ import annotations

import shutil

import pytest
from PIL import Image

from qdebug.model.load import DEMO_DIR

from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def config_only(tmp_path_factory):
    folder = tmp_path_factory.mktemp("config-only")
    shutil.copy(DEMO_DIR / "config.json", folder / "config.json")
    return folder


@pytest.mark.parametrize("option, words", [
    (["--layer", "99"], ["--layer 99", "0..3", "4 decoder layers"]),
    (["--head", "99"], ["--head 99", "0..3"]),
    (["--token", "99"], ["--token 99", "0..15"]),
    (["--token", "5", "--max-new-tokens", "5"], ["--token 5", "0..4"]),
    (["--layer", "-1"], ["--layer -1"]),
])
def test_attn_selection_is_checked_before_weights(config_only, red_png, option, words):
    proc = qdebug("attn", red_png, "Describe.", "--model", config_only, *option)
    one_line_error(proc, *words)
    assert proc.returncode == 2


def test_head_first_layer_is_checked_before_weights(config_only, red_png):
    proc = qdebug("diff", red_png, "Describe.", "--model", config_only, "--inject", "head-first:99")
    one_line_error(proc, "head-first:99", "0..3")
    assert proc.returncode == 2


@pytest.mark.parametrize("size", [(4000, 10), (10, 3000)])
def test_extreme_aspect_ratio_is_named_before_weights(tmp_path, config_only, size):
    path = tmp_path / "strip.png"
    Image.new("RGB", size, "white").save(path)
    proc = qdebug("attn", path, "Describe.", "--model", config_only)
    line = one_line_error(proc, "aspect ratio", "200:1", f"{size[0]}×{size[1]}")
    assert "disagree" not in line and proc.returncode == 2
