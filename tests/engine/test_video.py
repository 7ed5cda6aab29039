"""A video request through vLLM as through transformers, on the demo (its chat template has a video branch): a
list of JPEG frames in one `video_url`, the same frames through transformers' own processor and `generate`.

qdebug itself does not trace video yet (the modality redesign, issue 23): this checks what the engine ran
against the model's own code, from the engine trace's prompt ids, MRoPE positions and sampled tokens."""

from __future__ import annotations

import base64
import io

import httpx
import pytest

from .client import SAMPLE, engine_trace
from .vllm_server import DEMO

pytestmark = pytest.mark.vllm
PROMPT = "Describe the image."
SCENES = ("red_circle_top_left.png", "red_circle_top_left.png", "blue_circle_top_right.png", "blue_circle_top_right.png")


def _frames() -> list[bytes]:
    """Four JPEG frames of one size: two of one scene, two of another (two temporal patches)."""
    from PIL import Image

    out = []
    for name in SCENES:
        buf = io.BytesIO()
        Image.open(SAMPLE / name).convert("RGB").resize((112, 84)).save(buf, format="JPEG", quality=95)
        out.append(buf.getvalue())
    return out


@pytest.fixture(scope="module")
def both(traced_server):
    import torch
    from PIL import Image

    from qdebug.trace.tensor_names import TensorKind as T

    frames = _frames()
    url = "data:video/jpeg;base64," + ",".join(base64.b64encode(f).decode() for f in frames)
    body = {"model": "demo", "max_tokens": 8, "temperature": 0, "vllm_xargs": {"qdebug_trace": True, "qdebug_id": "video-1"},
            "messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": PROMPT}]}]}
    response = httpx.post(f"{traced_server.url}/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    engine = engine_trace(traced_server, "video-1")

    from transformers import AutoProcessor

    from tests.engine.client import demo_model

    loaded = demo_model()
    processor = AutoProcessor.from_pretrained(str(DEMO))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": PROMPT}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    video = [Image.open(io.BytesIO(f)).convert("RGB") for f in frames]
    inputs = processor(text=[text], videos=[video], return_tensors="pt")
    with torch.no_grad():
        out = loaded.model.generate(**inputs, max_new_tokens=8, do_sample=False)
        positions, _ = loaded.model.model.get_rope_index(inputs["input_ids"], mm_token_type_ids=inputs.get("mm_token_type_ids"),
                                                         video_grid_thw=inputs["video_grid_thw"], attention_mask=inputs["attention_mask"])
    reference = {"ids": inputs["input_ids"][0].tolist(), "grid": inputs["video_grid_thw"][0].tolist(),
                 "generated": out[0, inputs["input_ids"].shape[1]:].tolist(), "positions": positions[:, 0]}
    return engine, reference, response.json()["choices"][0]["message"]["content"], engine.tensor(T.SYNC_POSITION_IDS)


def test_the_template_places_the_video_and_vllm_runs_the_processors_tokens(both):
    engine, reference, _, _ = both
    video_pad = engine.tokens.count("<|video_pad|>")
    t, h, w = reference["grid"]
    assert (t, h, w) == (2, 6, 8) and video_pad == t * h * w // 4 == 24  # 4 frames → 2 temporal patches, merged 2×2
    assert engine.input_ids == reference["ids"]


def test_vllms_video_positions_and_tokens_are_transformers(both):
    engine, reference, answer, positions = both
    assert positions.tolist() == reference["positions"].tolist()  # temporal ids step per temporal patch, as get_rope_index
    assert len(set(positions[0].tolist()[3:27])) == 2  # the video's rows carry two temporal ids
    assert engine.generated_ids == reference["generated"]
    assert answer.strip() == engine.generated_text.strip()
