"""The demo model's word-level tokenizer and Qwen-style chat template."""

from __future__ import annotations

from .scenes import COLOURS, PROMPTS, QUADRANTS, SHAPES

# Qwen2-VL's special tokens, in Qwen's order, so adapters find them by name as in a real checkpoint.
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
UNK = "<unk>"

# Extra words a user is likely to type, so a new phrasing is not all <unk>.
_EXTRA_WORDS = (
    "system user assistant you are a helpful is this that what where which colour color shape "
    "of and it there picture image photo scene see do does show shows shown describe caption "
    "tell me about please the in on at , . ? ! : object objects how many one"
)


def words() -> list[str]:
    """All plain words of the vocabulary, deduplicated in a stable order."""
    pool: list[str] = []
    for text in [*COLOURS, *SHAPES, *QUADRANTS, *PROMPTS, _EXTRA_WORDS]:
        for w in text.lower().replace(".", " . ").replace("?", " ? ").split():
            if w not in pool:
                pool.append(w)
    return pool


CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif content['type'] == 'video' or 'video' in content or 'video_url' in content %}"
    "{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


# How to find the answer in a decoded prompt + generation (read by `transformers serve`'s response parser). This
# word-level tokenizer decodes `<|im_start|>assistant\n` as `<|im_start|> assistant` (words joined by spaces,
# no newline token), so Qwen's stock anchor never matches and the parser would hand back the prompt's tail.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|> assistant",
    "fields": {"content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)", "content": "text"}},
}


def build_tokenizer():
    """A `TokenizersBackend` tokenizer: lower-cased words and punctuation, Qwen special tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, UNK, *words()])}
    core = Tokenizer(WordLevel(vocab=vocab, unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # joins words with spaces
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=UNK,
        chat_template=CHAT_TEMPLATE,
        model_max_length=1024,
        padding_side="left",
    )
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer
