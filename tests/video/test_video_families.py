"""A video request through qdebug's own stages on Qwen2-VL (the demo), Qwen2.5-VL and Qwen3-VL.

Spans, row counts and temporal position ids are checked against the model's own processor output and
`get_rope_index`, and the tokens against an untraced `generate`. The models never learned video (the demo was
trained on still scenes; the others are random): nothing here asserts what they say about it."""

from __future__ import annotations

import pytest

from qdebug.trace.tensor_names import TensorKind as T

from .conftest import FAMILIES

PROMPT = "Describe the video."


@pytest.fixture(scope="module")
def traced(vl_model, frames_dir):
    """family → (loaded, trace) of the frame folder and the prompt, 3 new tokens."""
    from qdebug.trace.runner import RecordPolicy, trace_request
    from qdebug.trace.request import build_media_request
    from qdebug.trace.video_input import load_video

    out = {}

    def get(name):
        if name not in out:
            loaded = vl_model(name)
            request = build_media_request(PROMPT, videos=[load_video(frames_dir)], max_new_tokens=3)
            out[name] = loaded, trace_request(loaded, request, RecordPolicy()), request
        return out[name]

    return get


def _reference(loaded, request):
    """The processor's inputs for the same frames, get_rope_index's ids and an untraced generate."""
    import torch

    video = request.videos[0]
    text = loaded.processor.apply_chat_template(request.messages(), add_generation_prompt=True, tokenize=False)
    inputs = loaded.processor(text=[text], videos=[video.frames], video_metadata=[video.metadata()], do_sample_frames=False,
                              return_tensors="pt")
    grids = {k: inputs[k] for k in ("video_grid_thw", "second_per_grid_ts") if k in inputs}
    with torch.no_grad():
        ids, _ = loaded.model.model.get_rope_index(inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"],
                                                   attention_mask=inputs["attention_mask"], **grids)
        out = loaded.model.generate(**inputs, max_new_tokens=3, do_sample=False)
    return inputs, ids[:, 0], out[0, inputs["input_ids"].shape[1]:].tolist()


@pytest.mark.parametrize("family", FAMILIES)
def test_spans_rows_and_temporal_ids_are_the_models_own(traced, family):
    loaded, trace, request = traced(family)
    inputs, positions, generated = _reference(loaded, request)
    ids = inputs["input_ids"][0].tolist()
    assert trace.input_ids == ids and trace.generated_ids == generated  # the instrument changed nothing
    pads = [i for i, t in enumerate(ids) if t == loaded.config.video_token_id]
    t, h, w = inputs["video_grid_thw"][0].tolist()
    merge = loaded.config.vision_config.spatial_merge_size
    assert t == 2 and len(pads) == t * h * w // merge**2  # four frames, two frames per temporal slice

    prep = trace.stages["preprocess"].summary.videos[0]
    assert prep.frames == 4 and prep.frame_indices == [0, 1, 2, 3] and prep.frame_times == [0.0, 0.5, 1.0, 1.5]
    assert prep.temporal_patch_size == 2 and prep.grid_thw == [t, h, w] and prep.slice_times == [0.25, 1.25]
    assert [p for s, e in prep.runs for p in range(s, e)] == pads == trace.image_positions()
    if family == "qwen3_vl":  # its processor writes `<t seconds>` text before each slice: one run per slice
        assert len(prep.runs) == t and len(prep.timestamps) == t and all(prep.timestamps)
        assert prep.timestamps == prep.expected_timestamps  # stamped from the times qdebug sampled
    else:
        assert len(prep.runs) == 1 and prep.timestamps is None
    if family == "qwen2_5_vl":
        assert prep.second_per_grid_ts == float(inputs["second_per_grid_ts"][0]) == 1.0  # 2 frames a slice at 2 fps

    sync = trace.stages["sync"]
    video = sync.summary.videos[0]
    assert video.rows == video.placeholders == video.expected == len(pads) and video.max_abs_diff == 0.0
    expected = [int(positions[0, pads[k * (len(pads) // t)]]) for k in range(t)]
    assert video.temporal_ids == video.expected_temporal_ids == expected and len(set(expected)) == t
    assert trace.tensor(T.SYNC_POSITION_IDS).tolist() == positions.tolist()
    assert all(c.ok for c in sync.checks) and any("temporal ids" in c.name for c in sync.checks)
    assert trace.findings == []


@pytest.fixture(scope="module")
def diff_models():
    """Models `run_diff` loads, shared by this module's diffs."""
    return {}


def _diff(spec, frames_dir, models, **kw):
    from qdebug.commands.diff import DiffArgs, run_diff

    args = DiffArgs(str(frames_dir), PROMPT, model=spec, device="cpu", dtype="float32", max_new_tokens=3, **kw)
    (comparison,) = run_diff(args, models).comparisons
    return comparison


@pytest.mark.parametrize("family", FAMILIES)
def test_flat_temporal_ids_are_found_at_sync_from_the_ids_the_decoder_received(family_spec, frames_dir, diff_models, family):
    c = _diff(family_spec(family), frames_dir, diff_models, inject="temporal-ids-flat")
    assert c.result.first_divergence is not None and c.result.first_divergence.name == "sync"
    assert "position ids the decoder received differ" in next(s for s in c.result.stages if s.name == "sync").detail
    # The headline names what parted (the ids), not the rows' max |diff| (they agree)
    (first,) = [f for f in c.result.findings if f.kind == "first_divergence"]
    assert first.message.startswith("runs part at sync: position ids the decoder received differ") and "rows themselves agree" in first.message, first.message
    a, b = c.trace_a.stages["sync"], c.trace_b.stages["sync"]
    assert all(x.ok for x in a.checks)
    bad = [x for x in b.checks if not x.ok]
    assert any(x.name == "video 0: temporal ids == get_rope_index" for x in bad)
    got = b.summary.videos[0]
    assert got.temporal_ids == [0, 0] and got.expected_temporal_ids == a.summary.videos[0].temporal_ids
    # Measured: the temporal row the decoder received is 0 at every video row, and only there.
    received = c.trace_b.tensor(T.SYNC_POSITION_IDS)
    pads = c.trace_b.image_positions()
    assert received[0, pads].eq(0).all() and received[1:].equal(c.trace_a.tensor(T.SYNC_POSITION_IDS)[1:])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_embeds_path_agrees_on_a_video(family_spec, frames_dir, diff_models, family):
    c = _diff(family_spec(family), frames_dir, diff_models, vary="paths")
    verdicts = {s.name: s.verdict for s in c.result.stages}
    assert verdicts["encode"] == verdicts["sync"] == "ok"
    if family == "qwen3_vl":  # an inputs_embeds path carries no deepstack features (known; the detector says so)
        assert c.result.first_divergence.name == "layer.1"
        assert any("deepstack features missing" in f.message for f in c.result.findings)
    else:
        assert c.result.first_divergence is None and c.trace_a.generated_ids == c.trace_b.generated_ids
