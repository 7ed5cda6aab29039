"""--model/--device/--dtype resolution: what loads, and the one-line errors for what doesn't."""

import json

import pytest
import torch

from qdebug.errors import DeviceError, ModelLoadError
from qdebug.model.load import DEMO_DIR, load_model, resolve_device, resolve_dtype, resolve_model_dir


def test_demo_resolves_to_packaged_checkpoint():
    path = resolve_model_dir("demo")
    assert path == DEMO_DIR and (path / "model.safetensors").is_file()
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size <= 5 * 1024 * 1024


def test_local_directory_loads_through_auto_classes(tmp_path, demo):
    loaded = load_model(str(DEMO_DIR), "cpu")
    assert type(loaded.model).__name__ == "Qwen2VLForConditionalGeneration"
    assert type(loaded.processor).__name__ == "Qwen2VLProcessor"
    assert loaded.describe()["architecture"] == "Qwen2VLForConditionalGeneration"


@pytest.mark.parametrize(
    "config, message",
    [
        ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "not a supported Qwen multimodal model"),
        ({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}, "text-only"),
        ({}, "no model_type"),
    ],
)
def test_wrong_architectures_are_refused(tmp_path, config, message):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=message):
        load_model(str(tmp_path), "cpu")


def test_missing_and_malformed(tmp_path):
    with pytest.raises(ModelLoadError, match="no such directory"):
        resolve_model_dir(str(tmp_path / "nothing"))
    with pytest.raises(ModelLoadError, match="no config.json"):
        resolve_model_dir(str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="unreadable"):
        load_model(str(tmp_path), "cpu")


def test_uncached_hub_id_is_refused_without_network():
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache"):
        resolve_model_dir("Qwen/Qwen2-VL-2B-Instruct-not-cached")


def test_corrupt_weights_are_a_load_error(tmp_path):
    import shutil

    for f in DEMO_DIR.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ModelLoadError, match="could not load"):
        load_model(str(tmp_path), "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda():
    with pytest.raises(DeviceError, match="no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="no CUDA device"):
        resolve_device("cuda:1")
    assert resolve_device("auto") == "cpu"


def test_dtype_resolution():
    assert resolve_dtype("auto", "cpu") == "float32"
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(DeviceError, match="expected one of"):
        resolve_dtype("int8", "cpu")
    with pytest.raises(DeviceError, match="expected auto, cpu"):
        resolve_device("tpu")


def test_cached_hub_id_loads_offline(tmp_path, monkeypatch):
    import shutil

    snapshot = tmp_path / "models--qdebug--tiny-demo" / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    for f in DEMO_DIR.iterdir():
        shutil.copy(f, snapshot / f.name)
    (tmp_path / "models--qdebug--tiny-demo" / "refs").mkdir()
    (tmp_path / "models--qdebug--tiny-demo" / "refs" / "main").write_text(snapshot.name)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert resolve_model_dir("qdebug/tiny-demo") == snapshot
    loaded = load_model("qdebug/tiny-demo", "cpu")
    assert loaded.path == str(snapshot) and loaded.spec == "qdebug/tiny-demo"


def test_a_command_without_a_model_says_so_in_one_line():
    """A command needing a model whose --model is unset (the `repl --trace` shape of ModelChoice) refuses in one line,
    before anything loads, both where it reads the spec and where it loads."""
    from qdebug.model.choice import ModelChoice

    choice = ModelChoice(model=None)
    for use in (lambda: choice.spec, choice.load):
        with pytest.raises(ModelLoadError) as err:
            use()
        assert str(err.value) == "no --model was given; expected `demo`, a checkpoint directory or a cached hub id"
    assert ModelChoice().spec == "demo"
