"""The real thing on a CUDA device, in bfloat16: attn, diff, replay, the TUI, device maps."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from qdebug.cli import app

pytestmark = pytest.mark.gpu
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
IMAGE = str(ROOT / "sample_data" / "green_triangle_top_right.png")
OTHER = str(ROOT / "sample_data" / "red_circle_top_left.png")
CUDA = ["--device", "cuda", "--dtype", "bfloat16"]


def test_attn_png_json_save(tmp_path):
    png, saved = tmp_path / "a.png", tmp_path / "a.qdt"
    result = runner.invoke(app, ["attn", IMAGE, "Compare <image> and <image>.", "--image", OTHER, *CUDA, "--attn", "sdpa",
                                 "--png", str(png), "--save", str(saved), "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"]["device"].startswith("cuda") and data["model"]["dtype"] == "bfloat16"
    assert data["attention"]["layers_captured"] == [0, 1, 2, 3]
    assert all(img["attention_peak"] is not None for img in data["images"]) and len(data["images"]) == 2
    for step in data["steps"]:
        assert step["topk"][0]["token_id"] == step["token_id"]
    assert png.stat().st_size > 1000
    from qdebug.trace.schema import load_trace

    trace = load_trace(saved)
    assert trace.tensors["sync.embeds"].dtype == torch.bfloat16


def test_recorded_tensors_are_cpu(gpu_demo):
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import RecordPolicy, trace_request
    from tests.conftest import scene

    trace = trace_request(gpu_demo, build_request("Describe the image.", [], images=[scene(3).image], max_new_tokens=6),
                          RecordPolicy(keep_hidden=True))
    assert trace.tensors and all(t.device.type == "cpu" for t in trace.tensors.values())
    assert trace.tensors["layer.0.hidden"].dtype == torch.bfloat16


def test_traced_equals_plain_sdpa_on_gpu(gpu_demo):
    from qdebug.model.load import load_model
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import prepare, run_generate, trace_request
    from tests.conftest import scene

    plain = load_model("demo", "cuda", "bfloat16", attn_implementation="sdpa")
    request = build_request("Describe the image.", [], images=[scene(5).image], max_new_tokens=10)
    expected = run_generate(plain, prepare(plain, request).inputs, 10)
    assert trace_request(gpu_demo, request).generated_ids == expected


@pytest.mark.parametrize("vary", ["device", "dtype", "paths"])
def test_diff_vary(vary):
    result = runner.invoke(app, ["diff", IMAGE, "Describe the image.", "--vary", vary, "--device", "cuda", "--json", "-"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert data["stages"] and data["images"]
    if vary == "paths":
        assert result.exit_code == 0 and data["first_divergence"] is None
    if vary == "device":
        assert data["a"]["label"].split()[-1] == data["b"]["label"].split()[-1]  # one dtype on both sides


@pytest.mark.parametrize("mode", ["threads", "batched"])
def test_replay(mode, tmp_path):
    capture = tmp_path / "capture"
    shutil.copytree(ROOT / "sample_data" / "capture", capture)
    shutil.copy(ROOT / "sample_data" / "capture.jsonl", tmp_path / "capture.jsonl")
    result = runner.invoke(app, ["replay", str(tmp_path / "capture.jsonl"), "--mode", mode, *CUDA, "--json", "-"])
    data = json.loads(result.stdout)
    lines = (tmp_path / "capture.jsonl").read_text().splitlines()
    assert len(data["requests"]) == len(lines)
    # no fault injected: each request replayed with the others answers as it did alone, on CUDA as on the CPU
    assert all(r["verdict"] == "ok" and r["error"] is None for r in data["requests"]), [(r["id"], r["verdict"], r["error"]) for r in data["requests"]]
    assert all(r["replayed"] == r["reference"] for r in data["requests"]), [(r["id"], r["replayed"], r["reference"]) for r in data["requests"]]
    assert result.exit_code == 0, result.output


def test_tui_headless_on_a_gpu_trace(gpu_demo):
    import asyncio

    from qdebug.trace.request import build_request
    from qdebug.trace.runner import trace_request
    from qdebug.tui.app import build_app
    from tests.conftest import scene

    trace = trace_request(gpu_demo, build_request("Describe the image.", [], images=[scene(7).image], max_new_tokens=6))

    async def run():
        app_ = build_app(trace=trace, source="gpu")
        async with app_.run_test() as pilot:
            await pilot.press("j", "j", "k")
            await pilot.pause()
            return app_.screen.__class__.__name__

    assert asyncio.run(run())


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_device_map_over_two_gpus(tmp_path):
    from qdebug.model.load import load_model
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import trace_request
    from tests.conftest import scene

    loaded = load_model("demo", "cuda", "bfloat16", "sdpa", device_map="balanced")
    trace = trace_request(loaded, build_request("Describe the image.", [], images=[scene(9).image], max_new_tokens=6))
    assert all(t.device.type == "cpu" for t in trace.tensors.values())
    assert trace.meta.layers_captured == [0, 1, 2, 3]


def test_installed_command_on_gpu(tmp_path):
    out = subprocess.run([sys.executable, "-m", "qdebug", "attn", IMAGE, "Describe the image.", *CUDA, "--json", str(tmp_path / "a.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert json.loads((tmp_path / "a.json").read_text())["generated_text"]
