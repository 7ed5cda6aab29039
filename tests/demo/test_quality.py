"""The shipped demo checkpoint meets its quality bar, and training is deterministic from a seed."""

import torch

from qdebug.demo.evaluate import EVAL_SEED, evaluate
from qdebug.demo.train import TrainSettings, train


def test_quality_bar_on_200_fresh_scenes(demo):
    result = evaluate(demo, n=200, seed=EVAL_SEED)
    assert result.exact_rate >= 0.95, result.misses[:5]
    assert result.peak_rate >= 0.90


def test_training_is_deterministic(tmp_path):
    from safetensors.torch import load_file

    settings = TrainSettings(seed=7, steps=3, batch_size=4)
    a = load_file(train(settings, tmp_path / "a") / "model.safetensors")
    b = load_file(train(settings, tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    c = load_file(train(TrainSettings(seed=8, steps=3, batch_size=4), tmp_path / "c") / "model.safetensors")
    assert any(not torch.equal(a[k], c[k]) for k in a)
    # The trained directory loads through the same Auto classes as any checkpoint.
    from qdebug.model.load import load_model

    assert load_model(str(tmp_path / "a"), "cpu").adapter.name == "Qwen2VLForConditionalGeneration"
