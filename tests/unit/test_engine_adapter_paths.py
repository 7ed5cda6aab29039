"""The engine finds a vLLM model's decoder layers and norm where the architecture's model adapter says (issue 51: paths
live in model/adapters/), picked by the served config's model_type (the thinker's for Omni)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

import qdebug.model.adapters as adapters
from qdebug.engine.vllm_model import decoder_layers, decoder_norm, engine_adapter


def _model(model_type: str, **parts) -> torch.nn.Module:
    """A module tree shaped as vLLM's model is, with a `config` as vLLM's model classes keep it."""
    model = torch.nn.Module()
    for path, module in parts.items():
        node = model
        *inner, last = path.split(".")
        for name in inner:
            if not hasattr(node, name):
                node.add_module(name, torch.nn.Module())
            node = getattr(node, name)
        node.add_module(last, module)
    model.config = SimpleNamespace(model_type=model_type)
    return model


def test_a_qwen_vl_model_s_layers_and_norm_are_found_at_the_default_paths():
    layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
    model = _model("qwen2_vl", **{"language_model.model.layers": layers, "language_model.model.norm": torch.nn.LayerNorm(2)})
    assert engine_adapter(model) is adapters.QWEN2_VL
    assert decoder_layers(model) == list(layers) and isinstance(decoder_norm(model), torch.nn.LayerNorm)


def test_the_paths_an_adapter_declares_are_the_ones_the_engine_reads(monkeypatch):
    moved = dataclasses.replace(adapters.QWEN3_VL, engine_layer_paths=("decoder.blocks",), engine_norm_paths=("decoder.final",))
    monkeypatch.setattr(adapters, "ADAPTERS", tuple(moved if a is adapters.QWEN3_VL else a for a in adapters.ADAPTERS))
    blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    model = _model("qwen3_vl", **{"decoder.blocks": blocks, "decoder.final": torch.nn.LayerNorm(2),
                                  "language_model.model.layers": torch.nn.ModuleList()})
    assert decoder_layers(model) == list(blocks)  # before: the engine's own list found language_model.model.layers
    assert isinstance(decoder_norm(model), torch.nn.LayerNorm)
    with pytest.raises(AttributeError, match="decoder.blocks"):
        decoder_layers(_model("qwen3_vl"))


def test_an_omni_thinker_is_known_by_its_model_type_and_an_unknown_one_gets_the_qwen_vl_paths():
    thinker = _model("qwen2_5_omni_thinker")
    assert engine_adapter(thinker) is adapters.QWEN2_5_OMNI
    nested = _model("something_else")
    nested.config = SimpleNamespace(model_type="wrapper", thinker_config=SimpleNamespace(model_type="qwen2_5_omni"))
    assert engine_adapter(nested) is adapters.QWEN2_5_OMNI
    assert engine_adapter(torch.nn.Module()) is adapters.QWEN2_VL
