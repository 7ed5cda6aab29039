"""`diff --vary device` changes the device only."""

import pytest
import torch
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.commands.diff import DiffArgs, diff_sides

runner = CliRunner()


def test_vary_device_keeps_one_dtype(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    a, b = diff_sides(DiffArgs("x.png", "p", vary="device"))
    assert (a.device, b.device) == ("cpu", "cuda")
    assert a.dtype == b.dtype == "bfloat16" and a.attn_kernel == b.attn_kernel and a.input_path == b.input_path
    a, b = diff_sides(DiffArgs("x.png", "p", vary="device", dtype="float32"))
    assert a.dtype == b.dtype == "float32"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where CUDA is absent")
def test_vary_device_without_cuda_is_one_line():
    image = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "sample_data" / "green_triangle_top_right.png")
    result = runner.invoke(app, ["diff", image, "Describe the image.", "--vary", "device"])
    assert result.exit_code != 0
    assert result.output.startswith("qdebug: error: --device cuda") and result.output.count("\n") == 1
