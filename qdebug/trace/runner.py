"""trace(loaded, request) -> Trace: run one request through `generate` with hooks and assemble its stages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from qdebug.errors import PlaceholderError

from .assemble import assemble_trace
from .hooks import Recorder, recording
from .request import Request
from .schema import Trace


@dataclass
class CaptureOptions:
    """What to keep: top-k size, which layers' attention (None = all), full hidden states."""

    topk: int = 5
    attn_layers: set[int] | None = None
    keep_hidden: bool = True


@dataclass
class Prepared:
    """A request after the processor: model inputs plus what `preprocess` reports."""

    text: str
    inputs: dict
    spans: list[tuple[int, int]]


def prepare(loaded, request: Request) -> Prepared:
    """Apply the chat template and processor; check one placeholder span per image."""
    processor = loaded.processor
    text = processor.apply_chat_template(request.messages(), add_generation_prompt=True, tokenize=False)
    kwargs = {"images": request.images} if request.images else {}
    if request.audios:  # audio families: each clip resampled to the feature extractor's rate
        rate = int(processor.feature_extractor.sampling_rate)
        kwargs.update(audio=[clip.at_rate(rate) for clip in request.audios], sampling_rate=rate)
    try:
        inputs = processor(text=[text], return_tensors="pt", **kwargs)
    except ValueError as exc:  # the processor's own placeholder/image count check
        raise PlaceholderError(f"prompt and images disagree: {str(exc).splitlines()[0]}") from None
    image_token = loaded.adapter.image_token_id(loaded.config)
    spans = placeholder_spans(inputs["input_ids"][0].tolist(), image_token)
    media, count = ("clip", len(request.audios)) if request.audios else ("image", len(request.images))
    if len(spans) != count:
        raise PlaceholderError(
            f"the templated prompt has {len(spans)} {media} placeholder span(s) for {count} {media}(s); "
            f"expected one span per {media}"
        )
    return Prepared(text=text, inputs=dict(inputs), spans=spans)


def placeholder_spans(ids: list[int], image_token: int) -> list[tuple[int, int]]:
    """[start, end) of each contiguous run of the image placeholder token."""
    spans, start = [], None
    for i, tok in enumerate([*ids, None]):
        if tok == image_token and start is None:
            start = i
        elif tok != image_token and start is not None:
            spans.append((start, i))
            start = None
    return spans


INPUT_PATHS = ("ids", "embeds", "embeds-no-mrope")


def run_generate(loaded, inputs: dict, max_new_tokens: int, input_path: str = "ids"):
    """Greedy `generate` on the model's device; returns the generated ids (prompt excluded).

    input_path "ids" feeds token ids + pixels (the usual path). "embeds" feeds precomputed `inputs_embeds`
    (the prompt-embeds path) with the MRoPE ids from the model's own `get_rope_index`; "embeds-no-mrope"
    forgets those ids, so the model falls back to 1-D text positions (a known way to break this path).
    """
    import torch

    device_inputs = {k: (v.to(loaded.device) if hasattr(v, "to") else v) for k, v in inputs.items()}
    with torch.inference_mode():
        if input_path == "ids":
            out = loaded.model.generate(**device_inputs, max_new_tokens=max_new_tokens, do_sample=False)
            return out[0, inputs["input_ids"].shape[1] :].tolist()
        embeds = loaded.adapter.merged_embeddings(loaded.model, device_inputs)
        kwargs = {"inputs_embeds": embeds, "attention_mask": device_inputs["attention_mask"]}
        if input_path == "embeds" and device_inputs.get("image_grid_thw") is not None:
            mrope, _ = loaded.adapter.rope_index(
                loaded.model, device_inputs["input_ids"], device_inputs["mm_token_type_ids"],
                device_inputs["image_grid_thw"], device_inputs["attention_mask"],
            )
            text = torch.arange(mrope.shape[-1], device=mrope.device).view(1, 1, -1)
            kwargs["position_ids"] = torch.cat([text, mrope], dim=0)  # [text; t; h; w] as generate builds it
        out = loaded.model.generate(**kwargs, max_new_tokens=max_new_tokens, do_sample=False)
        return out[0].tolist()  # with inputs_embeds only, generate returns just the new tokens


def trace_request(
    loaded,
    request: Request,
    options: CaptureOptions | None = None,
    on_stage: Callable[[str], None] | None = None,
    taps: tuple = (),
    prepared: Prepared | None = None,
    input_path: str = "ids",
    faults: tuple = (),
    notify: Callable[..., None] | None = None,
) -> Trace:
    """Run `request` once under hooks and return its Trace.

    `taps` wrap the attention kernel (faults, detectors); `input_path` is one of INPUT_PATHS; `faults` may
    replace the merged rows or decoder inputs (qdebug.replay.faults); `notify(kind, **fields)` hears pipeline
    events (encode_start, buffer_write, stitch, first_token).
    """
    import torch

    options = options or CaptureOptions()
    prepared = prepared or prepare(loaded, request)
    ids = prepared.inputs["input_ids"][0].tolist()
    image_positions = [p for s, e in prepared.spans for p in range(s, e)]
    image_set = set(image_positions)
    queries = [p for p in range(len(ids)) if p not in image_set]
    recorder = Recorder(
        attn_layers=options.attn_layers,
        image_positions=image_positions,
        query_positions=queries,
        on_stage=on_stage,
        keep_hidden=options.keep_hidden,
        faults=faults,
        notify=notify,
    )
    recorder.on_stage("preprocess")
    from .family_record import family_recording

    with recording(loaded.model, loaded.adapter, recorder, *taps), family_recording(loaded) as extras:
        generated = run_generate(loaded, prepared.inputs, request.max_new_tokens, input_path)
    with torch.inference_mode():
        trace = assemble_trace(loaded, request, prepared, recorder, generated, queries, options)
    for extra in extras:  # linear-attention layers (Qwen3.5), deepstack (Qwen3-VL)
        extra.attach(trace, loaded, prepared)
    trace.meta["input_path"] = input_path
    return trace
