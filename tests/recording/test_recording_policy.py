"""Recording policy: CPU copies in the recorder, `--layers`, kept query rows, hidden rows, faithfulness to SDPA."""

import json
import sys

import pytest
import torch
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.trace.request import build_request
from qdebug.trace.runner import RecordPolicy, run_generate, prepare, trace_request
from qdebug.trace.tensor_names import TensorKind as T
from tests.conftest import scene

runner = CliRunner()


@pytest.fixture(scope="module")
def sdpa_demo():
    """The demo model computing with SDPA (the kernel a real checkpoint loads with)."""
    from qdebug.model.load import load_model

    return load_model("demo", "cpu", "float32", "sdpa")


@pytest.fixture(scope="module")
def bf16_demo():
    """The demo model in bfloat16, as a real checkpoint runs on a GPU."""
    from qdebug.model.load import load_model

    return load_model("demo", "cpu", "bfloat16", "sdpa")


def _request(seed=11, tokens=6):
    s = scene(seed, width=140, height=196)
    return build_request("Describe the image.", [], images=[s.image], max_new_tokens=tokens)


def test_recorder_keeps_cpu_copies_not_views():
    """The recorder's copy is detached, on CPU and its own storage (a later in-place write does not reach it)."""
    from qdebug.trace.hooks import Recorder

    rec = Recorder(image_positions=[0, 1], query_positions=[2], keep_hidden=True)
    rec.decoder_calls = 1
    hidden = torch.randn(1, 4, 8, dtype=torch.bfloat16, requires_grad=False)
    rec.layer_output(0, (hidden,))
    logits = torch.randn(1, 4, 10, dtype=torch.bfloat16)
    rec.logits_output(logits)
    hidden.add_(100)
    logits.add_(100)
    kept = rec.hidden[0]
    assert kept.device.type == "cpu" and kept.dtype == torch.bfloat16 and kept.abs().max() < 50
    assert rec.step_logits[0].device.type == "cpu" and rec.step_logits[0].dtype == torch.bfloat16  # the model's own
    assert rec.step_logits[0].abs().max() < 50
    assert kept.untyped_storage().data_ptr() != hidden.untyped_storage().data_ptr()


def test_trace_tensors_are_cpu_in_documented_dtypes(bf16_demo):
    trace = trace_request(bf16_demo, _request(), RecordPolicy(keep_hidden=True))
    assert trace.tensors and all(t.device.type == "cpu" for t in trace.tensors.values())
    assert trace.tensors["layer.0.hidden"].dtype == torch.bfloat16
    assert trace.tensors["sync.embeds"].dtype == torch.bfloat16
    assert trace.tensors["encode.0"].dtype == torch.bfloat16
    # Logits and attention weights are kept in the dtype the model computed them in (half a float32 copy's bytes)...
    assert trace.tensors["step.0.logits"].dtype == torch.bfloat16
    assert trace.tensors["layer.0.attn"].dtype == torch.bfloat16
    # ...and analysis reads them as float32, which softmax, top-k, KL and numpy need.
    assert trace.tensor(T.STEP_LOGITS, step=0).dtype == torch.float32
    assert trace.tensor(T.LAYER_ATTN, layer=0).dtype == torch.float32
    assert torch.equal(trace.tensor(T.LAYER_ATTN, layer=0), trace.tensors["layer.0.attn"].float())


def test_traced_run_is_bit_identical_to_plain_sdpa(sdpa_demo):
    """Capturing attention in every layer does not change what the SDPA model computes."""
    request = _request(tokens=8)
    prepared = prepare(sdpa_demo, request)
    scores: list = []
    plain = run_generate(sdpa_demo, prepared.inputs, 8, scores=scores)
    trace = trace_request(sdpa_demo, request, RecordPolicy(attn_layers=None), prepared=prepared)
    assert trace.generated_ids == plain
    for k, step in enumerate(trace.steps):
        assert step.topk.token_ids[0] == int(scores[k].argmax())


def _spy(monkeypatch, sdpa_demo):
    """Count which layers ran SDPA and which ran the eager formula, with how many query rows."""
    import transformers.integrations.sdpa_attention as sdpa_mod

    calls = {"sdpa": [], "eager": []}
    real_sdpa = sdpa_mod.sdpa_attention_forward
    module = sys.modules[type(sdpa_demo.adapter.decoder_layers(sdpa_demo.model)[0].self_attn).__module__]
    real_eager = module.eager_attention_forward

    def sdpa(m, q, *a, **kw):
        if getattr(m, "layer_idx", None) is not None:
            calls["sdpa"].append((m.layer_idx, q.shape[2]))
        return real_sdpa(m, q, *a, **kw)

    def eager(m, q, *a, **kw):
        if getattr(m, "layer_idx", None) is not None:
            calls["eager"].append((m.layer_idx, q.shape[2]))
        return real_eager(m, q, *a, **kw)

    monkeypatch.setattr(sdpa_mod, "sdpa_attention_forward", sdpa)
    monkeypatch.setattr(module, "eager_attention_forward", eager)
    return calls


def test_layers_1_records_only_layer_1_and_equals_all(sdpa_demo, monkeypatch):
    request = _request(tokens=6)
    calls = _spy(monkeypatch, sdpa_demo)
    one = trace_request(sdpa_demo, request, RecordPolicy(attn_layers={1}))
    assert {layer for layer, _ in calls["eager"]} == {1}  # only the captured layer computes weights...
    assert all(rows == 1 for _, rows in calls["eager"])  # ...for the kept query row only (never T × T)
    n_layers = len(sdpa_demo.adapter.decoder_layers(sdpa_demo.model))
    assert {layer for layer, _ in calls["sdpa"]} == set(range(n_layers))  # every layer's output came from SDPA
    assert one.meta.layers_captured == [1]
    assert [k for k in one.tensors if k.endswith(".attn")] == ["layer.1.attn"]
    every = trace_request(sdpa_demo, request, RecordPolicy(attn_layers=None))
    assert every.meta.layers_captured == list(range(n_layers))
    assert torch.equal(one.tensors["layer.1.attn"], every.tensors["layer.1.attn"])
    from qdebug.analysis.attention import attention_grid

    assert torch.equal(attention_grid(one, 0, layer=1), attention_grid(every, 0, layer=1))
    assert one.generated_ids == every.generated_ids


def test_side_weights_match_eager_kernel_weights(sdpa_demo, demo):
    """Weights from the kept rows beside SDPA equal the full eager kernel's rows (same request)."""
    request = _request(tokens=5)
    a = trace_request(sdpa_demo, request, RecordPolicy(queries="all"))
    b = trace_request(demo, request, RecordPolicy(queries="all"))
    assert a.attn_queries == b.attn_queries
    for layer in range(4):
        assert torch.allclose(a.tensors[f"layer.{layer}.attn"], b.tensors[f"layer.{layer}.attn"], atol=1e-5)


def test_default_keeps_stats_and_last_row_keep_hidden_keeps_all(sdpa_demo):
    request = _request(tokens=4)
    small = trace_request(sdpa_demo, request)
    full = trace_request(sdpa_demo, request, RecordPolicy(keep_hidden=True))
    n = len(small.input_ids)
    assert "layer.0.hidden" not in small.tensors and small.tensors["layer.0.last"].shape[0] == 1
    assert torch.equal(small.tensors["layer.2.last"][0], full.tensors["layer.2.hidden"][n - 1])
    assert full.tensors["layer.0.hidden"].shape[0] == n
    for layer in range(4):  # statistics cover every row either way
        assert small.stages[f"layer.{layer}"].summary.stats.max_abs == pytest.approx(full.stages[f"layer.{layer}"].summary.stats.max_abs)
    assert small.attn_queries == [n - 1 + k for k in range(len(small.steps))]
    none = trace_request(sdpa_demo, request, RecordPolicy(hidden_rows=False))
    assert not [k for k in none.tensors if k.startswith("layer.") and not k.endswith(".attn")]


def test_attn_json_names_layers_captured(scene_png):
    path, _ = scene_png
    result = runner.invoke(app, ["attn", str(path), "Describe the image.", "--device", "cpu", "--attn", "sdpa", "--layers", "1,-1",
                                 "--layer", "1", "--json", "-", "--max-new-tokens", "4"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["attention"]["layers_captured"] == [1, 3]
    assert data["steps"][0]["attention_peak"] is not None
    none = runner.invoke(app, ["attn", str(path), "Describe the image.", "--device", "cpu", "--layers", "none", "--json", "-", "--max-new-tokens", "2"])
    assert none.exit_code == 0, none.output
    assert json.loads(none.stdout)["attention"]["layers_captured"] == []


@pytest.mark.parametrize("spec", ["7", "x", "2-1", "0,,1", "-9"])
def test_bad_layers_spec_is_one_line(scene_png, spec):
    path, _ = scene_png
    result = runner.invoke(app, ["attn", str(path), "Describe the image.", "--device", "cpu", "--layers", spec])
    assert result.exit_code != 0
    assert result.output.startswith("qdebug: error: --layers") and result.output.count("\n") == 1
    assert "Traceback" not in result.output


def test_queries_positions_kept(sdpa_demo):
    request = _request(tokens=3)
    trace = trace_request(sdpa_demo, request, RecordPolicy(queries=[0, -1]))
    n = len(trace.input_ids)
    assert trace.attn_queries[:2] == [0, n - 1]
    assert trace.tensors["layer.0.attn"].shape[1] == 2 + len(trace.steps) - 1


def test_device_map_auto_traces_like_a_plain_load(sdpa_demo):
    """accelerate's dispatch hooks and qdebug's hooks work together (all layers on this machine's one device)."""
    from qdebug.model.load import load_model

    mapped = load_model("demo", "cpu", "float32", "sdpa", device_map="auto")
    assert mapped.device_map
    request = _request(tokens=5)
    a = trace_request(mapped, request)
    b = trace_request(sdpa_demo, request)
    assert a.generated_ids == b.generated_ids
    assert all(t.device.type == "cpu" for t in a.tensors.values())
    assert torch.equal(a.tensors["layer.3.attn"], b.tensors["layer.3.attn"])


def test_prompt_topk_only_when_saved(scene_png, tmp_path):
    """`attn` alone skips the lm_head pass over the whole prompt; `--save` (for the TUI's top-k panel) keeps it."""
    from qdebug.trace.schema import load_trace

    path, _ = scene_png
    saved = tmp_path / "t.qdt"
    result = runner.invoke(app, ["attn", str(path), "Describe the image.", "--device", "cpu", "--max-new-tokens", "2", "--save", str(saved)])
    assert result.exit_code == 0, result.output
    trace = load_trace(saved)
    assert trace.tensors["logits.topk_ids"].shape[0] == len(trace.input_ids)
    from qdebug.commands.attn import AttnArgs, run_attn

    lean = run_attn(AttnArgs([path], "Describe the image.", device="cpu", max_new_tokens=2, prompt_logits=False)).trace
    assert "logits.topk_ids" not in lean.tensors
    assert lean.stages["logits"].summary.last_topk == trace.stages["logits"].summary.last_topk
