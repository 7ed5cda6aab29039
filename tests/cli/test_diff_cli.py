"""`qdebug diff` through the CLI: JSON shape, PNG, saved traces, refusals."""

import json
from pathlib import Path

from typer.testing import CliRunner

from qdebug.cli import app

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
IMAGE = str(SAMPLE / "blue_square_bottom_right.png")


def test_head_first_json_and_png(tmp_path):
    png = tmp_path / "d.png"
    result = runner.invoke(app, ["diff", IMAGE, "Describe the image.", "--inject", "head-first:2", "--json", "-", "--png", str(png), "--device", "cpu"])
    assert result.exit_code == 1  # the runs part
    data = json.loads(result.stdout)
    assert data["first_divergence"]["stage"] == "layer.2"
    names = [s["name"] for s in data["stages"]]
    assert names[:3] == ["preprocess", "encode", "sync"] and names[3:7] == [f"layer.{i}" for i in range(4)] and names[7] == "logits"
    for s in data["stages"]:
        assert {"name", "max_abs", "rel", "cosine", "verdict"} <= set(s)
    for s in data["steps"]:
        assert {"index", "a_token", "b_token", "kl", "topk_overlap"} <= set(s)
    layout = [f for f in data["findings"] if f["kind"] == "layout"]
    assert layout and all(f["layer"] == 2 for f in layout)
    assert png.stat().st_size > 1000


def test_paths_agree_exit_zero():
    result = runner.invoke(app, ["diff", IMAGE, "Describe the image.", "--vary", "paths", "--order", "both", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [c["order"] for c in data["comparisons"]] == ["image-first", "text-first"]
    assert all(c["first_divergence"] is None and c["texts_agree"] for c in data["comparisons"])


def test_saved_traces(tmp_path):
    a, b, c = tmp_path / "a.qdt", tmp_path / "b.qdt", tmp_path / "c.qdt"
    for path, image, dtype in ((a, IMAGE, "float32"), (b, IMAGE, "bfloat16"), (c, str(SAMPLE / "red_circle_top_left.png"), "float32")):
        assert runner.invoke(app, ["attn", image, "Describe the image.", "--save", str(path), "--dtype", dtype, "--device", "cpu"]).exit_code == 0
    same = runner.invoke(app, ["diff", str(a), str(a), "--json", "-"])
    assert same.exit_code == 0
    assert all(s["max_abs"] == 0 for s in json.loads(same.stdout)["stages"] if s["verdict"] != "missing")
    mixed = runner.invoke(app, ["diff", str(a), str(b), "--json", "-"])
    data = json.loads(mixed.stdout)
    assert data["first_divergence"] is not None and mixed.exit_code == 1
    assert data["texts_agree"] == (data["a"]["text"] == data["b"]["text"])
    refused = runner.invoke(app, ["diff", str(a), str(c)])
    assert refused.exit_code == 5
    err = refused.stderr.strip()
    assert len(err.splitlines()) == 1 and "different requests" in err


def test_bad_diff_options():
    for args, expect in (
        (["diff", IMAGE, "x", "--inject", "head-first:9"], "head-first:9"),
        (["diff", IMAGE, "x", "--inject", "head-first:two"], "head-first:LAYER"),
        (["diff", IMAGE, "x", "--vary", "weather"], "--vary weather"),
        (["diff", IMAGE, "x", "--order", "sideways"], "--order sideways"),
        (["diff", "missing.png", "x"], "image not found"),
        (["diff", "missing.qdt", "b.qdt"], "trace not found"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code not in (0, None), args
        err = result.stderr.strip()
        assert len(err.splitlines()) == 1 and expect in err, err
