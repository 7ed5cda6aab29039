"""What generate chose from: processed vs raw top-k under the checkpoint's own logits processors."""

import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.model.load import DEMO_DIR
from qdebug.trace.request import build_request
from qdebug.trace.runner import trace_request
from tests.conftest import scene

runner = CliRunner()
IMAGE = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "sample_data" / "green_triangle_top_right.png")


def _checkpoint(tmp_path_factory, penalty: float):
    path = tmp_path_factory.mktemp("penalty") / "ckpt"
    shutil.copytree(DEMO_DIR, path)
    config = json.loads((path / "generation_config.json").read_text())
    config["repetition_penalty"] = penalty
    (path / "generation_config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def penalised(tmp_path_factory):
    """A copy of the demo checkpoint whose generation_config.json sets repetition_penalty 1.3."""
    return _checkpoint(tmp_path_factory, 1.3)


@pytest.fixture(scope="module")
def harsh(tmp_path_factory):
    """A penalty strong enough that the raw top-1 and generate's choice part."""
    return _checkpoint(tmp_path_factory, 50.0)


def test_every_token_is_the_argmax_of_its_processed_scores(penalised):
    result = runner.invoke(app, ["attn", IMAGE, "Describe the image.", "--model", str(penalised), "--device", "cpu", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["processors"] == ["repetition_penalty 1.3"]
    for step in data["steps"]:
        assert step["topk"][0]["token_id"] == step["token_id"]
        assert {"raw_topk", "raw_prob"} <= set(step)


def test_processed_and_raw_part_under_a_harsh_penalty(harsh):
    """The raw logits' top-1 is not what generate chose; the processed top-1 is (evidence from both distributions)."""
    from qdebug.model.load import load_model

    loaded = load_model(str(harsh), "cpu", "float32", "sdpa")
    s = scene(4, width=140, height=140)
    trace = trace_request(loaded, build_request("Describe the image.", [], images=[s.image], max_new_tokens=12))
    assert trace.meta.processors == ["repetition_penalty 50.0"]
    assert all(step.topk.token_ids[0] == step.token_id for step in trace.steps)
    parted = [step for step in trace.steps if step.raw_topk.token_ids[0] != step.token_id]
    assert parted, "a penalty of 50 should move at least one choice away from the raw top-1"
    step = parted[0]
    logits = trace.tensors[f"step.{step.index}.logits"]
    assert int(logits.argmax()) == step.raw_topk.token_ids[0]  # raw_topk is the recorded raw logits


def test_diff_vary_paths_agrees_with_a_penalty(penalised):
    result = runner.invoke(app, ["diff", IMAGE, "Describe the image.", "--vary", "paths", "--model", str(penalised),
                                 "--device", "cpu", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["first_divergence"] is None and data["texts_agree"] and data["first_step_apart"] is None


def test_no_processors_named_without_any(demo):
    s = scene(2, width=112, height=112)
    trace = trace_request(demo, build_request("Describe the image.", [], images=[s.image], max_new_tokens=3))
    assert trace.meta.processors == []
    for step in trace.steps:
        assert step.topk.token_ids == step.raw_topk.token_ids
        assert torch.isclose(torch.tensor(step.prob), torch.tensor(step.raw_prob))
