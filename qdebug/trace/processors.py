"""What the checkpoint's generation config makes `generate` do to the logits before it chooses."""

from __future__ import annotations


def active_processors(generation_config) -> list[str]:
    """The logits processors a greedy `generate` applies for this generation config, e.g. `repetition_penalty 1.05`."""
    names = []
    checks = (
        ("repetition_penalty", lambda v: v is not None and float(v) != 1.0),
        ("no_repeat_ngram_size", lambda v: bool(v)),
        ("min_length", lambda v: bool(v)),
        ("min_new_tokens", lambda v: bool(v)),
        ("bad_words_ids", lambda v: bool(v)),
        ("suppress_tokens", lambda v: bool(v)),
        ("begin_suppress_tokens", lambda v: bool(v)),
        ("sequence_bias", lambda v: bool(v)),
        ("forced_bos_token_id", lambda v: v is not None),
        ("forced_eos_token_id", lambda v: v is not None),
        ("exponential_decay_length_penalty", lambda v: v is not None),
    )
    for name, active in checks:
        value = getattr(generation_config, name, None)
        if active(value):
            names.append(f"{name} {value}")
    return names
