"""Train the demo Qwen2-VL checkpoint on procedural scenes, deterministically from a seed."""

from __future__ import annotations

import math
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .build import build_config, build_processor
from .scenes import PROMPTS, make_scene

CHECKPOINT_DIR = Path(__file__).parent / "checkpoint"


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters of a demo training run (defaults reproduce the shipped checkpoint)."""

    seed: int = 1234
    steps: int = 5000
    batch_size: int = 16
    lr: float = 1e-3
    warmup: int = 200
    weight_decay: float = 0.01


def _lr_at(step: int, s: TrainSettings) -> float:
    """Linear warm-up then cosine decay to 5% of the peak rate."""
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def make_batch(processor, rng: random.Random, batch_size: int):
    """One training batch: right-padded inputs with labels on the caption and `<|im_end|>` only."""
    scenes = [make_scene(rng) for _ in range(batch_size)]
    texts = []
    for scene in scenes:
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": rng.choice(PROMPTS)}]}]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        texts.append(prompt + scene.caption + "<|im_end|>")
    batch = processor(
        text=texts, images=[s.image for s in scenes], return_tensors="pt", padding=True, padding_side="right"
    )
    im_start = processor.tokenizer.convert_tokens_to_ids("<|im_start|>")
    labels = batch["input_ids"].clone()
    for row, ids in enumerate(batch["input_ids"].tolist()):
        answer_at = len(ids) - 1 - ids[::-1].index(im_start) + 2  # after "<|im_start|> assistant"
        labels[row, :answer_at] = -100
    labels[batch["attention_mask"] == 0] = -100
    batch["labels"] = labels
    return batch


def train(
    settings: TrainSettings = TrainSettings(),
    out_dir: Path = CHECKPOINT_DIR,
    on_step: Callable[[int, float], None] | None = None,
) -> Path:
    """Train from scratch and save a standard HF directory at `out_dir` (written atomically)."""
    import torch
    from transformers import GenerationConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    processor = build_processor()
    config = build_config(processor.tokenizer)
    config._attn_implementation = "sdpa"
    model = Qwen2VLForConditionalGeneration(config)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    for step in range(settings.steps):
        for group in optimiser.param_groups:
            group["lr"] = _lr_at(step, settings)
        loss = model(**make_batch(processor, rng, settings.batch_size)).loss
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        if on_step is not None:
            on_step(step, loss.item())
    model.eval()
    tok = processor.tokenizer
    model.generation_config = GenerationConfig(
        do_sample=False,
        max_new_tokens=16,
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    return _save_atomically(model, processor, Path(out_dir))


def _save_atomically(model, processor, out_dir: Path) -> Path:
    """Save into a temporary sibling folder, then swap it in, so a crash never leaves half a checkpoint."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".checkpoint-", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        tmp.chmod(0o755)
        for f in tmp.iterdir():
            f.chmod(0o644)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out_dir
