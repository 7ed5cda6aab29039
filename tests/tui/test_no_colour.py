"""Without colour (piped, NO_COLOR) the heatmap is a character ramp whose densest cell is the observed peak."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from rich.console import Console

from qdebug.analysis.attention import attention_grid, peak_of
from qdebug.render.attn_report import heatmap_panel
from qdebug.render.heatmap import IMAGE_RAMP, RAMP, heatmap, heatmap_ramp, image_ramp
from qdebug.tui.app import build_app

from .conftest import ROOT, SIZE

IMAGE = ROOT / "sample_data" / "blue_square_bottom_right.png"


def _print(renderable, **console) -> str:
    out = Console(file=io.StringIO(), width=100, **console)
    out.print(renderable)
    return out.file.getvalue()


def test_the_densest_ramp_cell_is_the_peak(trace):
    grid = attention_grid(trace, 0)
    peak = peak_of(grid, 0)
    lines = heatmap_ramp(grid, width=24).plain.splitlines()[1:-1]  # inside the frame
    s = 24 // max(grid.shape)
    rows_per_cell = len(lines) // grid.shape[0]
    cell = lines[peak.row * rows_per_cell][1 + peak.col * s]
    assert cell == RAMP[-1]
    assert sum(line.count(RAMP[-1]) for line in lines) >= s  # the peak cell, at least


def test_a_colourless_console_gets_the_ramp_and_a_colour_one_half_blocks(trace):
    grid = attention_grid(trace, 0)
    plain = _print(heatmap(grid), color_system=None)
    assert "▀" not in plain and RAMP[-1] in plain and "┌" in plain
    coloured = _print(heatmap(grid), color_system="truecolor", force_terminal=True)
    assert "▀" in coloured
    no_color = _print(heatmap(grid), color_system="truecolor", force_terminal=True, no_color=True)
    assert "▀" not in no_color and RAMP[-1] in no_color


def test_the_thumbnail_ramp_shares_no_symbol_with_the_heatmap(trace):
    """A light background drawn as `@` would read as the hottest attention cell: the image uses shade blocks."""
    from PIL import Image

    white = Image.new("RGB", (40, 40), "white")
    drawn = set(image_ramp(white, 4, 6, width=24).plain) - {"\n"}
    assert drawn == {IMAGE_RAMP[-1]}
    assert not (set(IMAGE_RAMP) - {" "}) & set(RAMP)
    grey = Image.linear_gradient("L").resize((60, 40))  # every shade
    assert not (set(image_ramp(grey, 4, 6, width=24).plain) - {" ", "\n"}) & set(RAMP)


def test_no_colour_heatmap_panel_snapshot(trace, snapshot):
    """The attn report's heatmap panel as a pipe receives it (peak bracketed, image as luminance)."""
    from qdebug.tui.images import pil_image
    from qdebug.tui.state import TraceDoc

    grid = attention_grid(trace, 0)
    text = _print(heatmap_panel(trace, trace.images[0], grid, "attention", pil_image(TraceDoc(trace), 0)), color_system=None)
    assert "▀" not in text
    assert text == snapshot


def test_no_colour_tui_heatmap_snapshot(snap_compare, trace, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = build_app(trace=trace)
    assert app.no_color
    assert snap_compare(app, terminal_size=SIZE, press=["down", "down", "right"])


def test_attn_piped_draws_a_readable_heatmap(tmp_path):
    env = {**os.environ, "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "qdebug", "attn", str(IMAGE), "Describe the image.", "--device", "cpu", "--max-new-tokens", "4"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "▀" not in out.stdout and RAMP[-1] in out.stdout and "[" + RAMP[-1] in out.stdout
    assert "peak: row" in out.stdout
