"""Qwen3-VL's `<t seconds>` before each temporal slice, read from what its processor wrote, wherever the video sits.

transformers before 5.25 keeps the chat template's `<|vision_start|>…<|vision_end|>` around a video's slices; 5.25
drops it, so the first slice's stamp follows the prompt's own text directly. A video after user text (no earlier
video run to stop at), two videos, and a stamp whose first token the tokenizer joins to the prompt's `.` are read
here on whichever transformers runs the suite (tests/compat runs them on the lowest one the range allows too)."""

from __future__ import annotations

import pytest

from qdebug.demo.vocab import CHAT_TEMPLATE, SPECIAL_TOKENS

# Where the videos go; `this.<video>` makes the byte-level tokenizer below join `.` and the stamp's `<` in one token.
PROMPTS = ("Describe the video.", "Look at this. <video> What happens?", "First <video> and then this.<video> Compare.",
           "<video><video>")


@pytest.fixture(scope="module")
def processor():
    """Qwen3-VL's processor over a byte-level BPE tokenizer (lossless: its decoded stamps are the processor's text)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast, Qwen2VLImageProcessor, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    core = Tokenizer(BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    corpus = [f"Look at this.<{t / 10:.1f} seconds> and then this. <{t:.1f} seconds>" for t in range(40)] * 4
    core.train_from_iterator(corpus, BpeTrainer(vocab_size=400, special_tokens=list(SPECIAL_TOKENS),
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    assert ".<" in core.get_vocab(), "the corpus should teach the `.<` merge the boundary case needs"
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  chat_template=CHAT_TEMPLATE)
    images = Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=64 * 64, max_pixels=256 * 256)
    return Qwen3VLProcessor(image_processor=images, tokenizer=tok, video_processor=Qwen3VLVideoProcessor(),
                            chat_template=CHAT_TEMPLATE)


class _Config:
    """The token ids slice_stamps reads from a model config."""

    def __init__(self, tok) -> None:
        ids = tok.convert_tokens_to_ids
        self.vision_start_token_id, self.vision_end_token_id = ids("<|vision_start|>"), ids("<|vision_end|>")
        self.video_token_id = ids("<|video_pad|>")


@pytest.mark.parametrize("prompt", PROMPTS)
def test_every_slice_reads_the_stamp_its_processor_wrote(processor, frames_dir, mp4, prompt):
    from qdebug.trace.runner import placeholder_spans
    from qdebug.trace.stages.video import slice_stamps, slice_times
    from qdebug.trace.request import build_media_request
    from qdebug.trace.video_input import load_video

    count = max(1, prompt.count("<video>"))
    videos = [load_video(frames_dir), load_video(mp4)][:count]
    request = build_media_request(prompt, videos=videos, max_new_tokens=1)
    text = processor.apply_chat_template(request.messages(), add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], videos=[v.frames for v in videos], video_metadata=[v.metadata() for v in videos],
                       do_sample_frames=False, return_tensors="pt")
    ids, tok = inputs["input_ids"][0].tolist(), processor.tokenizer
    config = _Config(tok)
    runs = placeholder_spans(ids, config.video_token_id)  # one run per slice; each video's t runs in order
    grids = [int(g[0]) for g in inputs["video_grid_thw"]]
    slices = [runs[sum(grids[:i]):sum(grids[:i + 1])] for i in range(count)]
    want = [[f"<{x:.1f} seconds>" for x in slice_times(v.times, t, 2)] for v, t in zip(videos, grids)]
    assert grids == [2, 4][:count] and want[0] == ["<0.2 seconds>", "<1.2 seconds>"]
    assert slice_stamps(tok, text, ids, slices, config) == want
    # What the prompt said around the videos is still there, untouched by the stamps.
    assert tok.decode(ids).count("this.") == prompt.count("this.")


@pytest.mark.parametrize("prompt", PROMPTS[1:3])
def test_a_traced_request_shows_the_first_slices_stamp_after_user_text(vl_model, frames_dir, mp4, prompt):
    from qdebug.trace.runner import RecordPolicy, trace_request
    from qdebug.trace.request import build_media_request
    from qdebug.trace.video_input import load_video

    loaded = vl_model("qwen3_vl")
    count = prompt.count("<video>")
    request = build_media_request(prompt, videos=[load_video(frames_dir), load_video(mp4)][:count], max_new_tokens=1)
    trace = trace_request(loaded, request, RecordPolicy())
    preps = trace.stages["preprocess"].summary.videos
    assert [len(p.timestamps) for p in preps] == [2, 4][:count]
    for prep in preps:
        assert prep.timestamps == prep.expected_timestamps  # nothing of the prompt's text in the first slice's stamp
    assert trace.findings == []
