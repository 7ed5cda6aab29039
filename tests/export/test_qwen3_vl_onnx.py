"""docs/families.md's Qwen3-VL ONNX ✓, measured: a clean export of the tiny Qwen3-VL (deepstack fed to its prefill graph)
agrees with transformers at every stage on a request of another length than the export's sample."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.installed import qdebug
from tests.docs_text import DOCS
from tests.families.build import build_qwen3_vl

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def test_a_clean_qwen3_vl_export_agrees_at_every_stage(tmp_path):
    page = " ".join((DOCS / "families.md").read_text(encoding="utf-8").split())
    assert "| Qwen3-VL | ✓ deepstack view | ✓ |" in page
    model = build_qwen3_vl(tmp_path / "qwen3_vl")
    out = tmp_path / "onnx"
    code, _out, err = qdebug(tmp_path, "export", "onnx", "--model", model, "--out", out)
    assert code == 0, err
    manifest = json.loads((out / "qdebug-onnx.json").read_text(encoding="utf-8"))
    assert set(manifest["graphs"]) == {"vision", "prefill"} and "deepstack.0" in manifest["graphs"]["prefill"]["inputs"]
    code, _out, err = qdebug(tmp_path, "diff", SAMPLE / "yellow_circle_bottom_left.png", "Describe.", "--onnx", out,
                             "--model", model, "--max-new-tokens", "2", "--json", tmp_path / "diff.json")
    assert code == 0, err
    stages = json.loads((tmp_path / "diff.json").read_text(encoding="utf-8"))["stages"]
    assert {s["verdict"] for s in stages} == {"ok"} and "layer.1" in {s["name"] for s in stages}, stages
