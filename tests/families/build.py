"""Tiny random checkpoints of every supported family, built from the demo tokenizer (CPU-cheap: CI has 2 cores)."""

from __future__ import annotations

import math
from pathlib import Path

AUDIO_RATE = 16000
AUDIO_CHUNK_S = 2  # the feature extractor pads every clip to this many seconds
ENGINE_AUDIO_CHUNK_S = 30  # vLLM's Qwen2-Audio takes Whisper's own 30 s window (3000 feature frames) only


def _tokenizer(extra: tuple[str, ...] = ()):
    from qdebug.demo.vocab import build_tokenizer

    tok = build_tokenizer()
    if extra:
        tok.add_special_tokens({"additional_special_tokens": list(extra)})
    return tok


# vLLM's CPU attention takes head sizes 32, 64, 80, ... only (checked at the first request), and its gated-delta-rule
# kernel linear head dims 64 or 128: `engine=True` builds each family at those sizes (hidden 128, head 32), otherwise
# at the cheapest sizes transformers runs (hidden 64, head 16).
ENGINE_WIDTH = 128
LINEAR_GAIN = 8.0


def _width(engine: bool) -> int:
    return ENGINE_WIDTH if engine else 64


def _mrope(rope: dict, engine: bool) -> dict:
    """MRoPE sections for the head size (they sum to half of it)."""
    return dict(rope, mrope_section=[4, 6, 6]) if engine else rope


def _text(tok, engine: bool = False, **kw) -> dict:
    ids = tok.convert_tokens_to_ids
    width = _width(engine)
    base = dict(vocab_size=len(tok) + 4, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"),
                pad_token_id=ids("<|endoftext|>"))
    base.update(kw)
    if engine and "head_dim" in base:
        base["head_dim"] = width // base["num_attention_heads"]
    if "rope_parameters" in base:
        base["rope_parameters"] = _mrope(base["rope_parameters"], engine)
    return base


def build_qwen2_audio(path: Path, engine: bool = False) -> Path:
    """A tiny random Qwen2-Audio checkpoint (Whisper-style tower of 2 layers, 2 s feature window)."""
    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor, WhisperFeatureExtractor

    tok = _tokenizer(("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"))
    chunk = ENGINE_AUDIO_CHUNK_S if engine else AUDIO_CHUNK_S
    frames = chunk * AUDIO_RATE // 160
    config = Qwen2AudioConfig(
        audio_config=dict(num_mel_bins=80, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
                          max_source_positions=frames // 2),
        text_config=dict(model_type="qwen2", **_text(tok, engine)),
        audio_token_id=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    torch.manual_seed(0)
    Qwen2AudioForConditionalGeneration(config).save_pretrained(path)
    fe = WhisperFeatureExtractor(feature_size=80, sampling_rate=AUDIO_RATE, chunk_length=chunk)
    Qwen2AudioProcessor(feature_extractor=fe, tokenizer=tok).save_pretrained(path)
    return path


def tone(path: Path, seconds: float = 1.0, rate: int = 22050, freq: float = 440.0, fmt: str = "WAV") -> Path:
    """A sine tone with a louder burst in its second half, written with soundfile."""
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    wave = 0.2 * np.sin(2 * math.pi * freq * t)
    wave[len(t) // 2 :] *= 3
    sf.write(str(path), wave.astype("float32"), rate, format=fmt)
    return path


def _vision_ids(tok) -> dict:
    ids = tok.convert_tokens_to_ids
    return dict(image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"))


def build_qwen2_vl(path: Path, engine: bool = False) -> Path:
    """A tiny random Qwen2-VL checkpoint (2 decoder layers)."""
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    from qdebug.demo.build import MAX_PIXELS, MIN_PIXELS

    tok = _tokenizer()
    config = Qwen2VLConfig(
        text_config=_text(tok, engine, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=2, embed_dim=32, hidden_size=_width(engine), num_heads=2, mlp_ratio=2, patch_size=14, spatial_merge_size=2,
                           temporal_patch_size=2),
        **_vision_ids(tok),
    )
    torch.manual_seed(0)
    Qwen2VLForConditionalGeneration(config).save_pretrained(path)
    Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS), tokenizer=tok,
                     video_processor=Qwen2VLVideoProcessor(), chat_template=tok.chat_template).save_pretrained(path)
    return path


def build_qwen2_5_vl(path: Path, engine: bool = False) -> Path:
    """A tiny random Qwen2.5-VL checkpoint (windowed vision attention, 2 decoder layers)."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    from qdebug.demo.build import MAX_PIXELS, MIN_PIXELS

    tok = _tokenizer()
    config = Qwen2_5_VLConfig(
        text_config=_text(tok, engine, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=_width(engine), patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1]),
        **_vision_ids(tok),
    )
    torch.manual_seed(0)
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(path)
    Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS), tokenizer=tok,
                        video_processor=Qwen2VLVideoProcessor(), chat_template=tok.chat_template).save_pretrained(path)
    return path


def _qwen3_processor(tok, path: Path) -> None:
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=256 * 256)
    Qwen3VLProcessor(image_processor=image_processor, tokenizer=tok, video_processor=Qwen3VLVideoProcessor(),
                     chat_template=tok.chat_template).save_pretrained(path)


QWEN3_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
QWEN3_VISION = dict(depth=3, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
                    spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64)


def build_qwen3_vl(path: Path, engine: bool = False) -> Path:
    """A tiny random Qwen3-VL checkpoint: 3 decoder layers, deepstack features from vision blocks 0 and 1."""
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tok = _tokenizer()
    config = Qwen3VLConfig(
        text_config=_text(tok, engine, num_hidden_layers=3, head_dim=16, rope_parameters=QWEN3_ROPE),
        vision_config=dict(QWEN3_VISION, out_hidden_size=_width(engine), deepstack_visual_indexes=[0, 1]),
        **_vision_ids(tok),
    )
    torch.manual_seed(0)
    Qwen3VLForConditionalGeneration(config).save_pretrained(path)
    _qwen3_processor(tok, path)
    return path


def build_qwen3_5(path: Path, engine: bool = False) -> Path:
    """A tiny random Qwen3.5 checkpoint: layers [linear, full, linear, full] (gated delta rule + softmax attention).
    `engine=True`: linear head dims 64 (vLLM's CPU kernel) and the published geometry, fewer key than value heads."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    tok = _tokenizer()
    # Equal key/value head counts for the linear layers: the PyTorch fallback kernel can then run a head-first call.
    linear = (dict(linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4) if engine else
              dict(linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=4, linear_num_value_heads=4))
    text = _text(tok, engine, num_hidden_layers=4, head_dim=16, rope_parameters=dict(QWEN3_ROPE, partial_rotary_factor=1.0),
                 layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                 linear_conv_kernel_dim=4, **linear)
    config = Qwen3_5Config(text_config=text, vision_config=dict(QWEN3_VISION, out_hidden_size=_width(engine)), **_vision_ids(tok))
    torch.manual_seed(0)
    model = Qwen3_5ForConditionalGeneration(config)
    if engine:  # a louder linear-attention output: its share of the stream stands well above bf16's rounding (a fault there shows)
        with torch.no_grad():
            for layer in model.model.language_model.layers:
                if hasattr(layer, "linear_attn"):
                    layer.linear_attn.out_proj.weight.mul_(LINEAR_GAIN)
    model.save_pretrained(path)
    _qwen3_processor(tok, path)
    return path


# Qwen2.5-Omni's own placeholders, as its published chat template writes them (image, audio, video).
OMNI_TOKENS = dict(image_token="<|IMAGE|>", audio_token="<|AUDIO|>", video_token="<|VIDEO|>", vision_bos_token="<|vision_bos|>",
                   vision_eos_token="<|vision_eos|>", audio_bos_token="<|audio_bos|>", audio_eos_token="<|audio_eos|>")
OMNI_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<|vision_bos|><|IMAGE|><|vision_eos|>' }}"
    "{% elif content['type'] == 'audio' %}{{ '<|audio_bos|><|AUDIO|><|audio_eos|>' }}"
    "{% elif content['type'] == 'video' %}{{ '<|vision_bos|><|VIDEO|><|vision_eos|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_qwen2_5_omni(path: Path, engine: bool = False) -> Path:
    """A tiny random Qwen2.5-Omni thinker (vision tower for images and video, Whisper-style audio tower, 2 decoder layers);
    `engine`: at the sizes vLLM's CPU build serves (vLLM serves the full checkpoint, `build_qwen2_5_omni_full`)."""
    import torch
    from transformers import (Qwen2_5OmniProcessor, Qwen2_5OmniThinkerConfig, Qwen2_5OmniThinkerForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLVideoProcessor, WhisperFeatureExtractor)

    from qdebug.demo.build import MAX_PIXELS, MIN_PIXELS

    tok = _tokenizer(tuple(OMNI_TOKENS.values()))
    tok._set_model_specific_special_tokens(special_tokens=OMNI_TOKENS)  # the processor reads tokenizer.image_token etc.
    tok.chat_template = OMNI_TEMPLATE
    ids = tok.convert_tokens_to_ids
    frames = AUDIO_CHUNK_S * AUDIO_RATE // 160
    config = Qwen2_5OmniThinkerConfig(
        audio_config=dict(num_mel_bins=80, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
                          max_source_positions=frames // 2, output_dim=_width(engine), n_window=50),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=_width(engine), patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1]),
        text_config=_text(tok, engine, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                          tie_word_embeddings=False),  # the thinker's head is untied; vLLM reads the text config's flag
        audio_token_index=ids("<|AUDIO|>"), image_token_index=ids("<|IMAGE|>"), video_token_index=ids("<|VIDEO|>"),
        audio_start_token_id=ids("<|audio_bos|>"), audio_end_token_id=ids("<|audio_eos|>"),
        vision_start_token_id=ids("<|vision_bos|>"), vision_end_token_id=ids("<|vision_eos|>"),
    )
    torch.manual_seed(0)
    Qwen2_5OmniThinkerForConditionalGeneration(config).save_pretrained(path)
    Qwen2_5OmniProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
                         video_processor=Qwen2VLVideoProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS), feature_extractor=WhisperFeatureExtractor(
                             feature_size=80, sampling_rate=AUDIO_RATE, chunk_length=AUDIO_CHUNK_S),
                         tokenizer=tok, chat_template=OMNI_TEMPLATE).save_pretrained(path)
    return path


def build_qwen2_5_omni_full(path: Path, thinker_dir: Path) -> Path:
    """A full Qwen2.5-Omni checkpoint (`qwen2_5_omni`, no talker) around the thinker at `thinker_dir`, its weights
    under `thinker.`, with the (empty) speaker file a full checkpoint carries."""
    import torch
    from transformers import AutoConfig, AutoProcessor, Qwen2_5OmniConfig, Qwen2_5OmniForConditionalGeneration, Qwen2_5OmniThinkerForConditionalGeneration

    thinker = AutoConfig.from_pretrained(thinker_dir)
    model = Qwen2_5OmniForConditionalGeneration(Qwen2_5OmniConfig(thinker_config=thinker.to_dict(), enable_audio_output=False))
    model.thinker.load_state_dict(Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(thinker_dir).state_dict())
    model.save_pretrained(path)
    AutoProcessor.from_pretrained(thinker_dir).save_pretrained(path)
    torch.save({}, Path(path) / "spk_dict.pt")
    return path


def video_with_sound(path: Path, seconds: int = 6, fps: int = 2, size: int = 112, rate: int = AUDIO_RATE) -> Path:
    """An MP4 (MPEG-4 video, AAC sound) whose frames darken over time and whose tone rises each second, written with PyAV."""
    import av
    import numpy as np

    with av.open(str(path), "w") as out:
        video = out.add_stream("mpeg4", rate=fps)
        video.width = video.height = size
        video.pix_fmt = "yuv420p"
        sound = out.add_stream("aac", rate=rate)
        sound.layout = "mono"
        for i in range(seconds * fps):
            frame = np.zeros((size, size, 3), np.uint8)
            frame[..., 2] = 255 - (200 * i) // (seconds * fps)
            for packet in video.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in video.encode():
            out.mux(packet)
        t = np.arange(seconds * rate) / rate
        wave = (0.2 * np.sin(2 * math.pi * (220 + 110 * np.floor(t)) * t)).astype(np.float32)[None]
        frame = av.AudioFrame.from_ndarray(wave, format="fltp", layout="mono")
        frame.sample_rate = rate
        for packet in [*sound.encode(frame), *sound.encode()]:
            out.mux(packet)
    return path


BUILDERS = {
    "qwen2_vl": build_qwen2_vl,
    "qwen2_5_vl": build_qwen2_5_vl,
    "qwen3_vl": build_qwen3_vl,
    "qwen3_5": build_qwen3_5,
    "qwen2_audio": build_qwen2_audio,
    "qwen2_5_omni": build_qwen2_5_omni,
}
