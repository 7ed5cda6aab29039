"""One accessor for a trace's tensors: canonical names built in one place, the saved names unchanged."""

import pytest

from qdebug.trace.tensor_names import TensorKind, layers_holding, tensor_name


@pytest.mark.parametrize(
    "kind, index, name",
    [
        (TensorKind.ENCODE, {"item": 1}, "encode.1"),
        (TensorKind.AUDIO_ENVELOPE, {"item": 0}, "audio.0.envelope"),
        (TensorKind.SYNC_EMBEDS, {}, "sync.embeds"),
        (TensorKind.SYNC_POSITION_IDS, {}, "sync.position_ids"),
        (TensorKind.SYNC_EXPECTED_POSITION_IDS, {}, "sync.expected_position_ids"),
        (TensorKind.LAYER_HIDDEN, {"layer": 3}, "layer.3.hidden"),
        (TensorKind.LAYER_LAST, {"layer": 0}, "layer.0.last"),
        (TensorKind.LAYER_STEP_HIDDEN, {"layer": 2}, "layer.2.step_hidden"),
        (TensorKind.LAYER_ATTN, {"layer": 12}, "layer.12.attn"),
        (TensorKind.LAYER_STATE_NORM, {"layer": 1}, "layer.1.state_norm"),
        (TensorKind.LOGITS_TOPK_IDS, {}, "logits.topk_ids"),
        (TensorKind.LOGITS_TOPK_PROBS, {}, "logits.topk_probs"),
        (TensorKind.LOGITS_ENTROPY, {}, "logits.entropy"),
        (TensorKind.STEP_LOGITS, {"step": 4}, "step.4.logits"),
    ],
)
def test_names_are_the_saved_ones(kind, index, name):
    assert tensor_name(kind, **index) == name
    assert type(tensor_name(kind, **index)) is str  # plain str keys: safetensors and JSON see no enum


@pytest.mark.parametrize("kind, index", [(TensorKind.LAYER_ATTN, {}), (TensorKind.SYNC_EMBEDS, {"layer": 0}),
                                         (TensorKind.STEP_LOGITS, {"layer": 0}), (TensorKind.ENCODE, {"item": 0, "step": 1})])
def test_a_wrong_index_is_refused(kind, index):
    with pytest.raises(ValueError, match=kind.value):
        tensor_name(kind, **index)


def test_layers_holding_reads_only_that_kind():
    names = ["layer.10.attn", "layer.2.attn", "layer.3.hidden", "encode.0", "step.1.logits"]
    assert layers_holding(TensorKind.LAYER_ATTN, names) == [2, 10]
    with pytest.raises(ValueError):
        layers_holding(TensorKind.STEP_LOGITS, names)


def test_trace_accessor(demo_trace):
    trace, _ = demo_trace
    assert trace.tensor(TensorKind.LAYER_ATTN, layer=0) is trace.tensors["layer.0.attn"]
    assert trace.tensor("step.logits", step=0) is trace.tensors["step.0.logits"]
    assert trace.has_tensor(TensorKind.ENCODE, item=0) and not trace.has_tensor(TensorKind.ENCODE, item=9)
    assert trace.tensor_or_none(TensorKind.LAYER_HIDDEN, layer=0) is None  # saved without --keep hidden
    assert trace.tensor_layers(TensorKind.LAYER_ATTN) == list(range(trace.num_layers))
    with pytest.raises(KeyError, match="step.logits tensor for step 99"):
        trace.tensor(TensorKind.STEP_LOGITS, step=99)
