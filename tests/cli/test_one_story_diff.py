"""One diff, one story: the header, the stages table, the finding and the JSON name the same first-divergence row; no None."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from qdebug.analysis.detectors.divergence import kl
from qdebug.cli import app

ROOT = Path(__file__).resolve().parents[2]
IMAGE = str(ROOT / "sample_data" / "blue_square_bottom_right.png")
PROMPT = "Describe the image."
WIDE = {"COLUMNS": "220"}  # one table row per line, so a row can be read back whole
TOKEN = re.compile(r"token (\d+) \((\w+)\)")


def _diff(*args: str, json_out: Path) -> tuple[str, dict]:
    """`qdebug diff ARGS --json FILE`: (what the terminal shows, the JSON), from one run."""
    result = CliRunner().invoke(app, ["diff", *args, "--json", str(json_out)], env=WIDE)
    assert json_out.exists(), result.output
    return result.output, json.loads(json_out.read_text())


@pytest.fixture(scope="module")
def transposed(tmp_path_factory) -> tuple[str, dict]:
    """`diff --onnx` of an export with layer 2's MLP weight written transposed (the issue's case)."""
    tmp = tmp_path_factory.mktemp("onnx")
    export = CliRunner().invoke(app, ["export", "onnx", "--out", str(tmp / "tx"), "--inject", "transpose-weight:layer.2.mlp"])
    assert export.exit_code == 0, export.output
    return _diff(IMAGE, PROMPT, "--onnx", str(tmp / "tx"), json_out=tmp / "d.json")


def test_header_table_finding_and_json_name_one_token(transposed):
    shown, data = transposed
    first = data["first_divergence"]
    assert first["stage"] == "layer.2"
    token = f"token {first['token_index']} ({first['token_kind']})"
    header = next(line for line in shown.splitlines() if "first divergence:" in line and "◀" not in line)
    row = next(line for line in shown.splitlines() if "◀ first divergence" in line)
    finding = next(f["message"] for f in data["findings"] if f["kind"] == "first_divergence")
    assert TOKEN.findall(header) == [(str(first["token_index"]), first["token_kind"])], header
    assert TOKEN.findall(row) == [(str(first["token_index"]), first["token_kind"])], row
    assert token in finding and f"channel {first['channel']}" in header


def test_onnx_diff_shows_no_none_and_no_negative_kl(transposed):
    shown, data = transposed
    assert "None" not in shown
    assert all(s["kl"] is None or s["kl"] >= 0 for s in data["steps"])
    encode = next(s for s in data["stages"] if s["name"] == "encode")
    assert encode["token_kind"] in ("image", None)  # encoder rows are named by the placeholder they fill


@pytest.mark.parametrize("args", [
    [str(ROOT / "tests" / "data" / "red_circle.qdt")] * 2,
    [IMAGE, PROMPT, "--inject", "head-first:2", "--device", "cpu"],
    [IMAGE, PROMPT, "--vary", "paths", "--order", "both"],
], ids=["saved-trace-twice", "head-first", "paths"])
def test_no_none_in_rendered_diff_reports(args, tmp_path):
    shown, _ = _diff(*args, json_out=tmp_path / "d.json")
    assert "None" not in shown, shown


def test_kl_of_identical_distributions_is_exactly_zero_and_never_negative():
    torch.manual_seed(0)
    logits = torch.randn(3, 50) * 8
    assert kl(logits, logits.clone()) == 0.0
    # Nearly equal distributions: float rounding may not push KL below zero.
    for scale in (1e-7, 1e-6, 1e-5):
        assert kl(logits, logits + scale * torch.randn_like(logits)) >= 0.0
