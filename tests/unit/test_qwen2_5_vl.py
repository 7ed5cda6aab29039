"""A Qwen2.5-VL checkpoint (tiny, random weights, built here) loads and traces through its adapter."""

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


def test_qwen2_5_vl_traces_faithfully(qwen25_dir):
    loaded = load_model(str(qwen25_dir), "cpu", "float32")
    plain = load_model(str(qwen25_dir), "cpu", "float32", attn_implementation="eager")
    assert loaded.adapter.name == "Qwen2_5_VLForConditionalGeneration"
    request = build_request("Describe the image.", [], images=[scene(3, width=112, height=168).image], max_new_tokens=5)
    trace = trace_request(loaded, request)
    assert trace.stages["sync"].ok and trace.images[0].grid_thw == (1, 12, 8)
    inputs = prepare(plain, request).inputs
    with torch.inference_mode():
        out = plain.model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert trace.generated_ids == out[0, inputs["input_ids"].shape[1]:].tolist()
