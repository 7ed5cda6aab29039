"""`qdebug attn` through Typer's CliRunner and as the installed command."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.demo.scenes import cell_in_quadrant

runner = CliRunner()


def test_json_to_stdout_is_pure_json(scene_png, tmp_path):
    path, s = scene_png
    result = runner.invoke(app, ["attn", str(path), "Describe the image.", "--json", "-", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= {"model", "generated_text", "images", "steps", "findings"}
    assert data["model"]["architecture"] == "Qwen2VLForConditionalGeneration"
    assert data["model"]["device"] == "cpu" and data["model"]["dtype"] == "float32"
    assert data["generated_text"] == s.caption
    (img,) = data["images"]
    assert img["size"] == [168, 112] and img["grid_thw"] == [1, 8, 12]
    assert img["span"][1] - img["span"][0] == 24
    assert data["findings"] == []
    steps = data["steps"]
    assert [st["token"] for st in steps[:-1]] == s.caption.split()
    for st in steps:
        assert {"token", "token_id", "prob", "topk", "attention_peak"} <= set(st)
        assert st["topk"][0]["token_id"] == st["token_id"]
        peak = st["attention_peak"]
        assert (peak["rows"], peak["cols"]) == (4, 6) and 0 <= peak["row"] < 4 and 0 <= peak["col"] < 6
    # The quadrant word's attention peaks where the shape is.
    quad = steps[s.caption.split().index("top")]["attention_peak"]
    assert cell_in_quadrant(quad["row"], quad["col"], 4, 6, s.quadrant)


def test_png_json_and_trace_files(scene_png, tmp_path):
    from PIL import Image

    from qdebug.trace.schema import load_trace

    path, s = scene_png
    png, js, qdt = tmp_path / "h.png", tmp_path / "r.json", tmp_path / "t.qdt"
    result = runner.invoke(
        app,
        ["attn", str(path), "Describe the image.", "--png", str(png), "--json", str(js), "--save", str(qdt), "--layer", "3", "--head", "1"],
    )
    assert result.exit_code == 0, result.output
    assert "generated" in result.stdout and s.caption in result.stdout and "top-k" in result.stdout
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 400
    data = json.loads(js.read_text())
    assert data["attention"]["layer"] == 3 and data["attention"]["head"] == 1
    assert load_trace(qdt).generated_text == s.caption
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.png", "r.json", "scene.png", "t.qdt"]


def _bad(args, tmp_path, expect):
    outs = [tmp_path / "o.png", tmp_path / "o.json", tmp_path / "o.qdt"]
    before = set(tmp_path.iterdir())
    result = runner.invoke(app, [*args, "--png", str(outs[0]), "--json", str(outs[1]), "--save", str(outs[2])])
    assert result.exit_code not in (0, None)
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("qdebug: error:"), err
    assert expect in err
    assert "Traceback" not in result.output
    assert set(tmp_path.iterdir()) == before  # nothing half-written


def test_bad_inputs_get_one_line_errors(scene_png, tmp_path):
    path, _ = scene_png
    text = tmp_path / "notes.txt"
    text.write_text("not an image")
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(path.read_bytes()[:100])
    cfg = tmp_path / "llama"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({"model_type": "llama"}))
    cases = [
        (["attn", str(tmp_path / "missing.png"), "x"], "image not found"),
        (["attn", str(text), "x"], "not an image"),
        (["attn", str(corrupt), "x"], "corrupt image"),
        (["attn", str(path), "<image> <image> two"], "2 <image> placeholder"),
        (["attn", str(path), "<image> one", "--image", str(path)], "1 <image> placeholder"),
        (["attn", str(path), "x", "--model", str(tmp_path / "nowhere")], "no such directory"),
        (["attn", str(path), "x", "--model", str(cfg)], "not a supported Qwen multimodal model"),
        (["attn", str(path), "x", "--layer", "9"], "--layer 9"),
    ]
    import torch

    if not torch.cuda.is_available():
        cases.append((["attn", str(path), "x", "--device", "cuda"], "no CUDA device"))
    for args, expect in cases:
        _bad(args, tmp_path, expect)


def test_installed_command_runs_and_help_is_light(scene_png):
    path, s = scene_png
    out = subprocess.run(["qdebug", "attn", str(path), "Describe the image.", "--json", "-"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["generated_text"] == s.caption
    helped = subprocess.run([sys.executable, "-X", "importtime", "-m", "qdebug", "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "attn" in helped.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in helped.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "textual" not in imported and "transformers" not in imported


@pytest.mark.parametrize("args", [["--help"], ["attn", "--help"], ["demo", "--help"]])
def test_help_lists_options(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 0


def test_installed_command_usage_errors_are_one_line():
    for args in (["attn"], ["attn", "x.png", "p", "--max-new-tokens", "0"], ["nonsense"]):
        out = subprocess.run(["qdebug", *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, args
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("qdebug: error:"), out.stderr
