"""The demo tokenizer and chat template behave like Qwen's where qdebug relies on them."""

from qdebug.demo.vocab import SPECIAL_TOKENS, build_tokenizer


def test_special_tokens_are_single_ids():
    tok = build_tokenizer()
    for t in SPECIAL_TOKENS:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tok.convert_ids_to_tokens(ids) == [t]


def test_caption_round_trips_and_template_places_the_image():
    tok = build_tokenizer()
    text = tok.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\n<|im_start|>assistant\n"
    ids = tok("a red circle in the top left", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == "a red circle in the top left"
    assert tok.unk_token_id not in ids


def test_unknown_words_map_to_unk_not_errors():
    tok = build_tokenizer()
    ids = tok("zebra crossing", add_special_tokens=False)["input_ids"]
    assert ids == [tok.unk_token_id] * 2
