"""Tiny random checkpoints of every supported family, built from the demo tokenizer (CPU-cheap: CI has 2 cores)."""

from __future__ import annotations

import math
from pathlib import Path

AUDIO_RATE = 16000
AUDIO_CHUNK_S = 2  # the feature extractor pads every clip to this many seconds


def _tokenizer(extra: tuple[str, ...] = ()):
    from qdebug.demo.vocab import build_tokenizer

    tok = build_tokenizer()
    if extra:
        tok.add_special_tokens({"additional_special_tokens": list(extra)})
    return tok


def _text(tok, **kw) -> dict:
    ids = tok.convert_tokens_to_ids
    base = dict(vocab_size=len(tok) + 4, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"),
                pad_token_id=ids("<|endoftext|>"))
    base.update(kw)
    return base


def build_qwen2_audio(path: Path) -> Path:
    """A tiny random Qwen2-Audio checkpoint (Whisper-style tower of 2 layers, 2 s feature window)."""
    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor, WhisperFeatureExtractor

    tok = _tokenizer(("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"))
    frames = AUDIO_CHUNK_S * AUDIO_RATE // 160
    config = Qwen2AudioConfig(
        audio_config=dict(num_mel_bins=80, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
                          max_source_positions=frames // 2),
        text_config=dict(model_type="qwen2", **_text(tok)),
        audio_token_id=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    torch.manual_seed(0)
    Qwen2AudioForConditionalGeneration(config).save_pretrained(path)
    fe = WhisperFeatureExtractor(feature_size=80, sampling_rate=AUDIO_RATE, chunk_length=AUDIO_CHUNK_S)
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
