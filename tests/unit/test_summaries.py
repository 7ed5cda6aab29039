"""Typed stage summaries: each stage's JSON object loads as its dataclass and is written back byte for byte."""

import json

from qdebug.trace.summaries import (ABSENT, LayerSummary, PreprocessSummary, Summary, SyncImage, SyncSummary, TensorStats,
                                    summary_from_json, summary_type)


def _same(stage: str, data: dict):
    summary = summary_from_json(stage, data)
    assert json.dumps(summary.to_json()) == json.dumps(data)
    return summary


def test_each_stage_gets_its_type():
    assert [summary_type(n).__name__ for n in ("preprocess", "encode", "sync", "layer.3", "logits", "step.0", "layer.x", "other")] == [
        "PreprocessSummary", "EncodeSummary", "SyncSummary", "LayerSummary", "LogitsSummary", "StepSummary", "Summary", "Summary"]


def test_sync_images_are_typed_and_nulls_are_kept():
    image = {"image": 0, "text_offset": 3, "visual_offset": None, "match": 0.5, "rows": 4, "placeholders": 4, "expected": 4,
             "max_abs_diff": None, "fingerprint": None}
    sync = _same("sync", {"images": [image], "position_ids_shape": [3, 9], "rope_deltas": [-2]})
    assert isinstance(sync, SyncSummary) and isinstance(sync.images[0], SyncImage) and sync.images[0].visual_offset is None
    assert sync.audio is None and sync.position_rows is None


def test_layer_statistics_sit_beside_its_own_keys():
    data = {"layer": 1, "shape": [9, 8], "mean": 0.0, "std": 1.0, "max_abs": 2.0, "norm_mean": 3.0, "norm_max": 4.0, "nan": 0, "inf": 0,
            "attn_shape": [4, 1, 9], "kind": "linear_attention", "linear_attention": {"kernel": "k"}}
    layer = _same("layer.1", data)
    assert isinstance(layer, LayerSummary) and layer.stats == TensorStats([9, 8], 0.0, 1.0, 2.0, 3.0, 4.0, 0, 0)
    assert layer.linear_attention == {"kernel": "k"} and layer.deepstack is None


def test_preprocess_writes_only_the_inputs_it_had():
    vision = _same("preprocess", {"text": "t", "num_tokens": 3, "pixel_values_shape": None, "image_grid_thw": [], "spans": []})
    audio = _same("preprocess", {"text": "t", "num_tokens": 3, "input_features_shape": [1, 80, 200], "frames_kept": [100], "spans": [[1, 2]]})
    assert isinstance(vision, PreprocessSummary) and vision.pixel_values_shape is None and vision.input_features_shape is ABSENT
    assert audio.pixel_values_shape is ABSENT and audio.frames_kept == [100]


def test_unknown_keys_and_odd_shapes_are_kept():
    odd = _same("sync", {"images": "not a list", "later": {"x": 1}})
    assert odd.images == "not a list" and odd.extra == {"later": {"x": 1}}
    assert _same("encode", {}).to_json() == {} and _same("made.up", {"a": 1}).extra == {"a": 1}
    assert Summary().to_json() == {}
