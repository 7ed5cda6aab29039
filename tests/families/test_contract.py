"""One contract for every supported family, on tiny random checkpoints built from the demo tokenizer."""

import asyncio
import json

import pytest
import torch
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.commands.diff import DiffArgs, run_diff
from qdebug.model.load import load_model
from qdebug.trace.audio import load_audio
from qdebug.trace.request import build_media_request
from qdebug.trace.request import build_request
from qdebug.trace.runner import prepare, trace_request
from tests.conftest import scene

FAMILIES = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen2_audio", "qwen2_5_omni"]
ARCHITECTURES = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
                 "qwen3_vl": "Qwen3VLForConditionalGeneration", "qwen3_5": "Qwen3_5ForConditionalGeneration",
                 "qwen2_audio": "Qwen2AudioForConditionalGeneration", "qwen2_5_omni": "Qwen2_5OmniThinkerForConditionalGeneration"}
# Where `diff --vary paths` is documented to part in float32, and the finding kind that says why.
PATHS_PART = {"qwen3_vl": ("layer.1", "deepstack")}
# One decoder layer of each kind the family has (softmax attention everywhere; Qwen3.5 adds linear attention).
LAYERS = {"qwen3_5": [0, 1]}
runner = CliRunner()


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    """A scene PNG and a 1 s tone WAV on disk."""
    from .build import tone

    root = tmp_path_factory.mktemp("media")
    png = root / "scene.png"
    scene(3, width=112, height=168).image.save(png)
    return {"image": png, "audio": tone(root / "tone.wav")}


def _request(name, media, tokens=3):
    if name == "qwen2_audio":
        return build_media_request("What is it?", clips=[load_audio(media["audio"])], max_new_tokens=tokens)
    return build_request("Describe the image.", [media["image"]], max_new_tokens=tokens)


def _input(name, media) -> str:
    return str(media["audio" if name == "qwen2_audio" else "image"])


_traces: dict = {}


def _trace(family_model, name, media):
    if name not in _traces:
        _traces[name] = trace_request(family_model(name), _request(name, media))
    return _traces[name]


@pytest.mark.parametrize("name", FAMILIES)
def test_spans_rows_merge_and_positions(family_model, name, media):
    loaded = family_model(name)
    assert loaded.adapter.name == ARCHITECTURES[name]
    trace = _trace(family_model, name, media)
    inputs = prepare(loaded, _request(name, media)).inputs
    ids = inputs["input_ids"][0].tolist()
    token = loaded.adapter.image_token_id(loaded.config)
    placeholders = [i for i, t in enumerate(ids) if t == token]
    clips = trace.meta.audio or []
    spans = [tuple(c["span"]) for c in clips] or [i.span for i in trace.images]
    assert [p for s, e in spans for p in range(s, e)] == placeholders  # spans match the processor's placeholders
    encoded = sum(trace.tensors[f"encode.{k}"].shape[0] for k in range(len(spans)))
    assert encoded == len(placeholders)  # encoder rows == placeholder count
    embeds = trace.tensors["sync.embeds"]
    merged = torch.cat([trace.tensors[f"encode.{k}"] for k in range(len(spans))])
    assert torch.equal(embeds[placeholders], merged)  # merged rows == encoder rows, where the placeholders are
    checks = {c.name: c.ok for c in trace.stages["sync"].checks}
    position = [n for n in checks if "position" in n]
    assert position and all(checks[n] for n in position)  # position ids equal the model's own
    assert all(s.ok for s in trace.stages.values())


@pytest.mark.parametrize("name", FAMILIES)
def test_each_declared_encoder_is_recorded_and_its_calls_are_each_items_encode_rows(family_model, name, media):
    """One path for every family: `prepare` finds each item's placeholders from the encoders the adapter declares, the
    hooks record those encoders' calls, and each item's `encode` rows are its share of them."""
    from qdebug.trace.hooks import Recorder, recording
    from qdebug.trace.media import item_rows
    from qdebug.trace.runner import run_generate

    loaded = family_model(name)
    prepared = prepare(loaded, _request(name, media))
    token = loaded.adapter.image_token_id(loaded.config)
    assert [p for m in prepared.media for p in m.positions] == [i for i, t in enumerate(prepared.inputs["input_ids"][0].tolist()) if t == token]
    rec = Recorder()
    with recording(loaded.model, loaded.adapter, rec):
        run_generate(loaded, prepared.inputs, 1)
    used = {e.module for e in loaded.adapter.encoders() if any(m.modality == e.modality for m in prepared.media)}
    assert {module for module, _, _ in rec.encoder_calls} == used and len(rec.encoder_calls) == len(used)
    rows, notes = item_rows(loaded, prepared.inputs, prepared.media, rec.encoder_calls)
    assert not notes and sorted(rows) == [m.item for m in prepared.media]
    trace = _trace(family_model, name, media)
    for m in prepared.media:
        assert rows[m.item].shape[0] == m.expected == len(m.positions)
        assert torch.equal(trace.tensors[f"encode.{m.item}"], rows[m.item])


@pytest.mark.parametrize("name", FAMILIES)
def test_traced_tokens_equal_untraced_generate(family_dir, family_model, name, media):
    plain = load_model(str(family_dir(name)), "cpu", "float32", attn_implementation="eager")
    trace = _trace(family_model, name, media)
    inputs = prepare(plain, _request(name, media)).inputs
    with torch.inference_mode():
        out = plain.model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert trace.generated_ids == out[0, inputs["input_ids"].shape[1]:].tolist()


@pytest.mark.parametrize("name", FAMILIES)
def test_saved_trace_round_trips(family_model, name, media, tmp_path):
    from qdebug.trace.schema import load_trace, save_trace

    trace = _trace(family_model, name, media)
    back = load_trace(save_trace(trace, tmp_path / "t.qdt"))
    assert back.to_json() == trace.to_json()
    assert json.dumps(back.to_json()) == json.dumps(trace.to_json())  # same keys in the same order, byte for byte
    assert set(back.tensors) == set(trace.tensors) and all(torch.equal(back.tensors[k], trace.tensors[k]) for k in trace.tensors)


@pytest.mark.parametrize("name", FAMILIES)
def test_paths_agree_in_float32_or_name_the_reason(family_dir, name, media):
    ((_, result, _, _),) = run_diff(DiffArgs(_input(name, media), "Describe the image.", vary="paths", model=str(family_dir(name)),
                                             device="cpu", dtype="float32", max_new_tokens=2)).comparisons
    if name in PATHS_PART:
        stage, kind = PATHS_PART[name]
        assert result.first_divergence.name == stage and any(f.kind == kind for f in result.findings)
    else:
        assert result.first_divergence is None, result.first_divergence


@pytest.mark.parametrize("name", FAMILIES)
def test_head_first_is_localised_on_each_kind_of_layer(family_dir, name, media):
    for layer in LAYERS.get(name, [1]):
        ((_, result, _, _),) = run_diff(DiffArgs(_input(name, media), "Describe the image.", inject=f"head-first:{layer}",
                                                 model=str(family_dir(name)), device="cpu", dtype="float32", max_new_tokens=2)).comparisons
        assert result.first_divergence.name == f"layer.{layer}"
        assert {f.layer for f in result.findings if f.kind == "layout"} == {layer}


@pytest.mark.parametrize("name", FAMILIES)
def test_tui_request_screen_opens_on_its_trace(family_model, name, media):
    from qdebug.tui.app import build_app
    from qdebug.tui.screens.request import RequestScreen
    from qdebug.tui.widgets.stage_list import StageList
    from tests.tui.conftest import SIZE

    trace = _trace(family_model, name, media)

    async def run():
        app = build_app(trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, RequestScreen)
            assert [r.name for r in app.screen.query_one(StageList).rows] == trace.stage_names

    asyncio.run(run())


def test_unsupported_architecture_is_one_line_listing_the_families(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"]}))
    res = runner.invoke(app, ["attn", "sample_data/red_circle_top_left.png", "hi", "--model", str(tmp_path)])
    assert res.exit_code == 3
    line = res.output.strip()
    assert "\n" not in line and line.startswith("qdebug: error:") and "llava" in line
    for family in FAMILIES:
        assert family in line


@pytest.mark.parametrize("name", FAMILIES)
def test_estimate_counts_the_family_from_its_config_alone(family_dir, family_model, name):
    res = runner.invoke(app, ["estimate", "--model", str(family_dir(name)), "--dtype", "float32", "--device", "cpu", "--json", "-"])
    assert res.exit_code == 0, res.output
    est = json.loads(res.stdout)
    real = family_model(name).model
    assert est["architecture"] == ARCHITECTURES[name]
    # The meta-device count equals the loaded model's own (tied weights counted once).
    assert est["parameters"] == sum(p.numel() for p in real.parameters())
    assert est["weights_bytes"] == est["parameters"] * 4 and est["trace_bytes"] > 0
