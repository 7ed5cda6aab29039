"""ONNX exports made once per session: the demo clean and with each fault preset, a tiny Qwen3-VL without deepstack."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
IMAGE = str(SAMPLE / "blue_square_bottom_right.png")
PROMPT = "Describe the image."


@pytest.fixture(scope="session")
def clean_export(tmp_path_factory):
    """The demo exported by the installed `qdebug` command (a real process, as a user runs it)."""
    out = tmp_path_factory.mktemp("onnx") / "demo"
    command = [shutil.which("qdebug")] if shutil.which("qdebug") else [sys.executable, "-m", "qdebug"]
    done = subprocess.run([*command, "export", "onnx", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out, done


def _export(loaded, out, injects):
    from qdebug.export.build import deepstack_count, export_onnx
    from qdebug.export.inject import parse_injects

    export_onnx(loaded, out, parse_injects(injects, len(loaded.adapter.decoder_layers(loaded.model)), deepstack_count(loaded)))
    return out


@pytest.fixture(scope="session")
def transposed_export(plain_demo, tmp_path_factory):
    """Layer 2's MLP weight written transposed."""
    return _export(plain_demo, tmp_path_factory.mktemp("onnx") / "transposed", ["transpose-weight:layer.2.mlp"])


@pytest.fixture(scope="session")
def transposed_square_export(plain_demo, tmp_path_factory):
    """Layer 1's first square attention weight (q_proj, 128 × 128) written transposed."""
    return _export(plain_demo, tmp_path_factory.mktemp("onnx") / "transposed-square", ["transpose-weight:layer.1.attn"])


@pytest.fixture(scope="session")
def text_positions_export(plain_demo, tmp_path_factory):
    """Position ids exported as 1-D text positions."""
    return _export(plain_demo, tmp_path_factory.mktemp("onnx") / "text-positions", ["mrope-text-only"])


@pytest.fixture(scope="session")
def qwen3_dir(tmp_path_factory):
    """A tiny random Qwen3-VL checkpoint (deepstack from vision layers 0 and 1)."""
    import torch
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
    path = tmp_path_factory.mktemp("qwen3vl")
    Qwen3VLForConditionalGeneration(config).save_pretrained(path)
    image_processor = Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=256 * 256)
    Qwen3VLProcessor(image_processor=image_processor, tokenizer=tok, video_processor=Qwen3VLVideoProcessor(),
                     chat_template=tok.chat_template).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def qwen3_no_deepstack(qwen3_dir, tmp_path_factory):
    """The Qwen3-VL checkpoint exported with its prefill graph taking no deepstack features."""
    from qdebug.model.load import load_model

    loaded = load_model(str(qwen3_dir), "cpu", "float32", attn_implementation="eager")
    return _export(loaded, tmp_path_factory.mktemp("onnx") / "qwen3-no-deepstack", ["drop-deepstack"])
