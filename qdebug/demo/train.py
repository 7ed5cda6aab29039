"""Train the demo Qwen2-VL checkpoint on procedural scenes, deterministically from a seed."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qdebug.errors import OutputError
from qdebug.outputs import check_creatable

from .build import build_config, build_processor
from .scenes import PROMPTS, make_scene

CHECKPOINT_DIR = Path(__file__).parent / "checkpoint"
# The files save_pretrained writes for the demo model and its processor (across transformers versions). A folder
# holding only these, config.json and the weights among them, is a previous checkpoint and may be replaced;
# any other file is someone else's, and the folder is refused.
CHECKPOINT_FILES = frozenset({
    "config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
    "chat_template.jinja", "chat_template.json", "processor_config.json", "preprocessor_config.json",
    "video_preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt",
})


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
    """Train from scratch and save a standard HF directory at `out_dir` (written atomically).

    `out_dir` is checked first (OutputError before any training): it must be new, empty or a previous checkpoint.
    """
    out_dir = check_out_dir(out_dir)
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
    return _save_atomically(model, processor, out_dir)


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """The folder a checkpoint may go to (absolute, links followed), or OutputError saying why not.

    Accepted: a path that does not exist yet, an empty folder, or a previous demo checkpoint (only
    CHECKPOINT_FILES in it); its parent must be writable, since the new checkpoint is swapped in from there.
    """
    where = f"--out {out_dir}"
    target = Path(os.path.realpath(out_dir))  # `.`, `..` and a symlinked folder: the folder they name
    try:
        if target.exists() and not target.is_dir():
            raise OutputError(f"{where}: exists and is not a folder (expected a new or empty folder, or a demo checkpoint)")
        if target.parent == target:
            raise OutputError(f"{where}: is the file system root (expected a folder to hold the checkpoint)")
        if target.is_dir():
            stranger = _not_a_checkpoint(target)
            if stranger is not None:
                raise OutputError(f"{where}: not empty and not a demo checkpoint ({stranger}); expected a new or empty "
                                  "folder, or one `qdebug demo train` wrote (nothing in it is removed)")
        check_creatable(target, where)
    except OSError as exc:  # a name too long, a folder that cannot be listed...
        raise OutputError(f"{where}: unusable ({exc.strerror or type(exc).__name__}); expected a new or empty folder") from None
    return target


def _not_a_checkpoint(folder: Path) -> str | None:
    """None for an empty folder or a previous demo checkpoint; else what makes it neither (one phrase)."""
    entries = sorted(folder.iterdir())
    if not entries:
        return None
    for entry in entries:
        if entry.name not in CHECKPOINT_FILES:
            return f"{entry.name} is not a checkpoint file"
        if entry.is_symlink() or not entry.is_file():
            return f"{entry.name} is not a regular file"
    names = {e.name for e in entries}
    if not {"config.json", "model.safetensors"} <= names:
        return "no config.json and model.safetensors"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return "config.json does not read as JSON"
    if not isinstance(config, dict) or config.get("model_type") != "qwen2_vl":
        return "config.json is not a Qwen2-VL config"
    return None


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
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # our own half-written temporary
        raise
    return swap_in(tmp, out_dir)


def swap_in(new: Path, out_dir: Path) -> Path:
    """Put the finished checkpoint folder `new` at `out_dir`, removing only a previous checkpoint's own files.

    `out_dir` is checked again (it may have changed during training); if it is refused now, `new` is kept and
    named in the error, so the training is not lost either.
    """
    try:
        check_out_dir(out_dir)
    except OutputError as exc:
        raise OutputError(f"{exc.message}; the trained checkpoint is in {new}") from None
    if not out_dir.exists() or not any(out_dir.iterdir()):
        os.replace(new, out_dir)  # a missing or empty folder is replaced in one rename
        return out_dir
    old = Path(tempfile.mkdtemp(prefix=".checkpoint-old-", dir=out_dir.parent))
    os.replace(out_dir, old)  # the previous checkpoint steps aside (onto an empty folder: one rename)
    os.replace(new, out_dir)
    _remove_checkpoint(old)
    return out_dir


def _remove_checkpoint(folder: Path) -> None:
    """Delete a set-aside previous checkpoint: its CHECKPOINT_FILES, then the folder if nothing else is left."""
    for name in CHECKPOINT_FILES:
        (folder / name).unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # something else appeared in it: left for its owner, never removed
