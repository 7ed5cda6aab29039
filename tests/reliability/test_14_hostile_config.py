"""Issue 21 item 12: `estimate` and `attn` meet a hostile config.json (zero heads, wrong types, null sections, absurd
layer counts) with one line and exit 3, before any model is built."""

from __future__ import annotations

import json

import pytest

from qdebug.model.load import DEMO_DIR

from .conftest import one_line_error, qdebug

CASES = {
    "zero heads": ("text_config.num_attention_heads", 0, ["text_config.num_attention_heads is 0"]),
    "zero vision heads": ("vision_config.num_heads", 0, ["vision_config.num_heads is 0"]),
    "text_config null": ("text_config", None, ["text_config is null"]),
    "text_config list": ("text_config", [], ["text_config is a list"]),
    "negative size": ("text_config.hidden_size", -128, ["hidden_size is -128"]),
    "string size": ("text_config.hidden_size", "128", ['hidden_size is "128"']),
    "4.5 layers": ("text_config.num_hidden_layers", 4.5, ["num_hidden_layers is 4.5"]),
    "true layers": ("text_config.num_hidden_layers", True, ["num_hidden_layers is true"]),
    "1e6 layers": ("text_config.num_hidden_layers", 1e6, ["num_hidden_layers is 1000000.0", "10,000"]),
    "a million layers": ("text_config.num_hidden_layers", 1_000_000, ["num_hidden_layers is 1000000", "10,000"]),
    "kv heads do not divide": ("text_config.num_key_value_heads", 3, ["not a multiple", "num_key_value_heads 3"]),
}


def _hostile(tmp_path, field: str, value) -> str:
    config = json.loads((DEMO_DIR / "config.json").read_text())
    *parents, last = field.split(".")
    node = config
    for key in parents:
        node = node[key]
    node[last] = value
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.mark.parametrize("case", CASES)
def test_estimate_names_the_field(tmp_path, case):
    field, value, words = CASES[case]
    proc = qdebug("estimate", "--model", _hostile(tmp_path, field, value), timeout=120)
    one_line_error(proc, "config.json", *words)
    assert proc.returncode == 3


@pytest.mark.parametrize("case", ["zero heads", "text_config null", "1e6 layers"])
def test_attn_names_the_field(tmp_path, red_png, case):
    field, value, words = CASES[case]
    proc = qdebug("attn", red_png, "Describe.", "--model", _hostile(tmp_path, field, value), timeout=120)
    one_line_error(proc, "config.json", *words)
    assert proc.returncode == 3


def test_estimate_without_hidden_size_uses_the_architectures_default(tmp_path):
    """A size config.json leaves out is transformers' default for the architecture (as loading would build it)."""
    config = json.loads((DEMO_DIR / "config.json").read_text())
    del config["text_config"]["hidden_size"]
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    proc = qdebug("estimate", "--model", folder, "--json", "-", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["parameters"] > 0
