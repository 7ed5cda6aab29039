"""`qdebug estimate` on the published Qwen-VL configs (config.json values as fixtures; no weights anywhere)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
IMAGE = str(Path(__file__).resolve().parents[2] / "sample_data" / "green_triangle_top_right.png")

# Parameter counts the model cards publish (safetensors metadata), in billions.
PUBLISHED = {
    "Qwen2-VL-2B-Instruct": 2.21,
    "Qwen2-VL-7B-Instruct": 8.29,
    "Qwen2.5-VL-3B-Instruct": 3.75,
    "Qwen2.5-VL-7B-Instruct": 8.29,
    "Qwen2.5-VL-72B-Instruct": 73.4,
    "Qwen3-VL-2B-Instruct": 2.13,
    "Qwen3-VL-8B-Instruct": 8.77,
}


def _estimate(name: str, *extra: str) -> dict:
    result = runner.invoke(app, ["estimate", "--model", str(CONFIGS / name), "--json", "-", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _meta_count(name: str) -> int:
    """An independent meta-device instantiation through transformers' Auto class."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(CONFIGS / name)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_match_meta_instantiation_and_model_card(name):
    data = _estimate(name, "--dtype", "bfloat16", "--device", "cuda")
    assert {"architecture", "parameters", "dtype", "weights_bytes", "trace_bytes", "extra_bytes"} <= set(data)
    assert data["parameters"] == _meta_count(name)
    assert abs(data["parameters"] / 1e9 - PUBLISHED[name]) / PUBLISHED[name] < 0.01
    assert data["dtype"] == "bfloat16" and data["weights_bytes"] == 2 * data["parameters"]


def test_qwen2_5_vl_7b_bf16_is_params_times_two():
    data = _estimate("Qwen2.5-VL-7B-Instruct", "--dtype", "bfloat16", "--device", "cuda")
    assert data["architecture"] == "Qwen2_5_VLForConditionalGeneration"
    assert abs(data["weights_bytes"] - data["parameters"] * 2) <= 0.02 * data["parameters"] * 2
    assert 8.2e9 < data["parameters"] < 8.4e9


def test_default_policy_trace_fits_the_budget_at_2b():
    """2B widths, 1,024 visual tokens, 28 layers: the default trace is within 100 MB; every prompt row is far more."""
    default = _estimate("Qwen2-VL-2B-Instruct", "--dtype", "bfloat16", "--device", "cuda", "--image-tokens", "1024")
    assert default["trace_bytes"] <= 100e6
    assert default["extra_bytes"] < 0.15 * default["weights_bytes"]
    full = _estimate("Qwen2-VL-2B-Instruct", "--dtype", "bfloat16", "--device", "cuda", "--keep", "hidden", "--queries", "all")
    assert full["trace_bytes"] > 5 * default["trace_bytes"]
    fewer = _estimate("Qwen2-VL-2B-Instruct", "--dtype", "bfloat16", "--device", "cuda", "--layers", "0,-1")
    assert fewer["layers_captured"] == 2 and fewer["trace_bytes"] < default["trace_bytes"]


def test_human_output_and_installed_command():
    out = subprocess.run([sys.executable, "-m", "qdebug", "estimate", "--model", str(CONFIGS / "Qwen2-VL-2B-Instruct"), "--dtype", "bfloat16"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "2,208,985,600 parameters" in out.stdout and "per layer" in out.stdout


def test_bad_model_is_one_line(tmp_path):
    result = runner.invoke(app, ["estimate", "--model", str(tmp_path)])
    assert result.exit_code != 0 and result.output.startswith("qdebug: error: ") and result.output.count("\n") == 1


def test_attn_refuses_up_front_with_the_estimate():
    """72B in float32 cannot fit this machine: attn refuses before reading any weight (the fixture has none)."""
    result = runner.invoke(app, ["attn", IMAGE, "Describe the image.", "--model", str(CONFIGS / "Qwen2.5-VL-72B-Instruct"), "--device", "cpu"])
    assert result.exit_code != 0
    line = result.output.strip()
    assert line.startswith("qdebug: error: this request needs about") and "73.41B parameters" in line and line.count("\n") == 0
