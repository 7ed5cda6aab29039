"""Qwen2.5-VL and Qwen3-VL checkpoints (tiny, random weights, built here) load and trace faithfully through their adapters."""

import pytest
import torch

from qdebug.model.load import load_model
from qdebug.trace.request import build_request
from qdebug.trace.runner import prepare, trace_request
from tests.conftest import scene


@pytest.fixture(scope="module")
def qwen25_dir(tmp_path_factory):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    from qdebug.demo.build import MAX_PIXELS, MIN_PIXELS
    from qdebug.demo.vocab import build_tokenizer

    tok = build_tokenizer()
    ids = tok.convert_tokens_to_ids
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=80, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                         bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>")),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1]),
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("qwen25")
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(path)
    Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS), tokenizer=tok,
                        video_processor=Qwen2VLVideoProcessor(), chat_template=tok.chat_template).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    from transformers import Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    from qdebug.demo.vocab import build_tokenizer

    tok = build_tokenizer()
    ids = tok.convert_tokens_to_ids
    config = Qwen3VLConfig(
        text_config=dict(vocab_size=80, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True},
                         bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>")),
        vision_config=dict(depth=3, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64, deepstack_visual_indexes=[0, 1]),
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("qwen3")
    Qwen3VLForConditionalGeneration(config).save_pretrained(path)
    image_processor = Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=256 * 256)
    Qwen3VLProcessor(image_processor=image_processor, tokenizer=tok, video_processor=Qwen3VLVideoProcessor(),
                     chat_template=tok.chat_template).save_pretrained(path)
    return path


@pytest.mark.parametrize(
    "fixture, architecture, grid",
    [("qwen25_dir", "Qwen2_5_VLForConditionalGeneration", (1, 12, 8)), ("qwen3_dir", "Qwen3VLForConditionalGeneration", (1, 10, 8))],
)
def test_traces_faithfully(request, fixture, architecture, grid):
    path = request.getfixturevalue(fixture)
    loaded = load_model(str(path), "cpu", "float32")
    plain = load_model(str(path), "cpu", "float32", attn_implementation="eager")
    assert loaded.adapter.name == architecture
    req = build_request("Describe the image.", [], images=[scene(3, width=112, height=168).image], max_new_tokens=5)
    trace = trace_request(loaded, req)
    assert trace.stages["sync"].ok and trace.images[0].grid_thw == grid
    inputs = prepare(plain, req).inputs
    with torch.inference_mode():
        out = plain.model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert trace.generated_ids == out[0, inputs["input_ids"].shape[1]:].tolist()


def test_qwen3_vl_embeds_path_shows_the_dropped_deepstack_features(qwen3_dir):
    from qdebug.commands.diff import DiffArgs, run_diff

    image = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png")
    ((_, result, _, _),) = run_diff(DiffArgs(image, "Describe the image.", vary="paths", model=str(qwen3_dir), device="cpu", max_new_tokens=3)).comparisons
    verdicts = {s.name: s.verdict for s in result.stages}
    # Encoder, merge and positions agree; the first layer after a deepstack injection does not.
    assert verdicts["encode"] == verdicts["sync"] == verdicts["layer.0"] == "ok"
    assert result.first_divergence.name == "layer.1"
