"""trace(loaded, request) -> Trace: run one request through `generate` with hooks and assemble its stages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from qdebug.errors import PlaceholderError
from qdebug.vocab import StageName

from .assemble import assemble_trace
from .hooks import Recorder, recording
from .media import MediaItem, media_items, media_kwargs
from .protocols import AttentionTap, Fault, PipelineListener
from .request import Request
from .schema import Trace


@dataclass
class RecordPolicy:
    """What a trace keeps (the default policy is bounded: see README "Recording policy").

    topk: alternatives per step. attn_layers: decoder layers that record attention weights (None = all,
    empty = none); the others never compute weights. queries: prompt rows whose attention is kept: "gen"
    (the last prompt position, which chose the first token), "all", or a list of prompt positions; each
    generated token's row is always kept. keep_hidden: every prompt row of every layer's output (default:
    per-layer statistics plus the last prompt row and each new token's row; hidden_rows=False: statistics only).
    """

    topk: int = 5
    attn_layers: set[int] | None = None
    keep_hidden: bool = False
    queries: str | list[int] = "gen"
    hidden_rows: bool = True  # False: per-layer statistics only, no hidden-state rows at all (replay)
    # Top-k and entropy at every prompt position (what the TUI's top-k panel shows): an lm_head pass over the
    # whole prompt, ~15% of a 2B prefill on CPU. False: only the last position's (`attn` without --save/--tui).
    prompt_logits: bool = True


@dataclass
class Prepared:
    """A request after the processor: model inputs plus every item at its encoder (`trace.media.MediaItem`, its
    placeholder positions included), built the same way for every family."""

    text: str
    inputs: dict
    media: list[MediaItem]

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Each item's [first placeholder, last placeholder + 1), in item order."""
        return [m.extent for m in self.media]

    @property
    def video_slices(self) -> list[list[tuple[int, int]]] | None:
        """Each video's runs of its placeholder (one run on Qwen2/2.5-VL; one per temporal slice on Qwen3-VL, whose
        processor writes `<t seconds>` text between them), or None for a request without video."""
        runs = [m.runs for m in self.media if m.modality == "video"]
        return runs or None

    @property
    def visual_positions(self) -> list[int]:
        """The keys attention is kept over, in sequence order: the images' placeholder positions, or every item's when
        the request has no image (a video, a clip)."""
        images = [p for m in self.media if m.modality == "image" for p in m.positions]
        return images or sorted(p for m in self.media for p in m.positions)


def prepare(loaded, request: Request) -> Prepared:
    """Apply the chat template and the processor to every item, then find each item's placeholders (one path for every
    family: the encoders its adapter declares)."""
    if request.videos and (request.images or request.audios) and not loaded.adapter.mixed_media:
        raise PlaceholderError(f"{len(request.videos)} video(s) with other media for {loaded.adapter.name}; expected videos "
                               "only in a video request (images with a video are not traced yet)")
    text = loaded.processor.apply_chat_template(request.messages(), add_generation_prompt=True, tokenize=False)
    try:
        inputs = dict(loaded.processor(text=[text], return_tensors="pt", **media_kwargs(loaded, request)))
    except ValueError as exc:  # the processor's own placeholder count checks
        raise PlaceholderError(f"prompt and media disagree: {str(exc).splitlines()[0]}") from None
    items = media_items(loaded, request, inputs)
    if request.use_audio_in_video:
        inputs["use_audio_in_video"] = True  # generate's model kwarg: the positions interleave each video with its sound
    return Prepared(text=text, inputs=inputs, media=items)


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


def run_generate(loaded, inputs: dict, max_new_tokens: int, input_path: str = "ids", scores: list | None = None):
    """Greedy `generate` on the model's device, with the checkpoint's own logits processors; returns the
    generated ids (prompt excluded).

    input_path "ids" feeds token ids + pixels (the usual path). "embeds" feeds precomputed `inputs_embeds`
    (the prompt-embeds path) with the MRoPE ids from the model's own `get_rope_index`; "embeds-no-mrope"
    forgets those ids, so the model falls back to 1-D text positions (a known way to break this path).
    The embeds paths also pass the prompt's token ids, which the model does not embed again: logits
    processors (repetition penalty) then see the same prompt on both paths. `scores`, if given, receives
    each step's processed scores (what generate chose from) as CPU float32 vectors.
    """
    import torch

    device_inputs = {k: (v.to(loaded.device) if hasattr(v, "to") else v) for k, v in inputs.items()}
    want = {"output_scores": True, "return_dict_in_generate": True} if scores is not None else {}
    prompt_len = inputs["input_ids"].shape[1]
    with torch.inference_mode():
        if input_path == "ids":
            out = loaded.model.generate(**device_inputs, max_new_tokens=max_new_tokens, do_sample=False, **want)
        else:
            embeds = loaded.adapter.merged_embeddings(loaded.model, device_inputs)
            kwargs = {"input_ids": device_inputs["input_ids"], "inputs_embeds": embeds, "attention_mask": device_inputs["attention_mask"]}
            if input_path == "embeds" and (device_inputs.get("video_grid_thw") is not None or device_inputs.get("image_grid_thw") is not None):
                # the model's own position function over whatever media the request has (images, video, Omni's audio)
                mrope, _ = loaded.adapter.media_rope_index(loaded.model, device_inputs)
                text = torch.arange(mrope.shape[-1], device=mrope.device).view(1, 1, -1)
                kwargs["position_ids"] = torch.cat([text, mrope], dim=0)  # [text; t; h; w] as generate builds it
            out = loaded.model.generate(**kwargs, max_new_tokens=max_new_tokens, do_sample=False, **want)
    sequences = out.sequences if scores is not None else out
    if scores is not None:
        scores.extend(s[0].detach().to("cpu", torch.float32, copy=True) for s in out.scores)
    return sequences[0, prompt_len:].tolist()


def trace_request(
    loaded,
    request: Request,
    options: RecordPolicy | None = None,
    on_stage: Callable[[str], None] | None = None,
    taps: tuple[AttentionTap, ...] = (),
    prepared: Prepared | None = None,
    input_path: str = "ids",
    faults: tuple[Fault, ...] = (),
    listener: PipelineListener | None = None,
) -> Trace:
    """Run `request` once under hooks and return its Trace.

    `taps` wrap the attention kernel (faults, detectors); `input_path` is one of INPUT_PATHS; `faults` may
    replace the merged rows or decoder inputs (qdebug.replay.faults); `listener` hears the pipeline moments
    (encoding started, rows synced, first token).
    """
    import torch

    options = options or RecordPolicy()
    prepared = prepared or prepare(loaded, request)
    ids = prepared.inputs["input_ids"][0].tolist()
    image_positions = prepared.visual_positions
    queries = query_rows(options.queries, len(ids))
    recorder = Recorder(
        attn_layers=options.attn_layers,
        image_positions=image_positions,
        query_positions=queries,
        on_stage=on_stage,
        keep_hidden=options.keep_hidden,
        hidden_rows=None if options.hidden_rows else [],
        faults=faults,
        listener=listener,
    )
    recorder.on_stage(StageName.PREPROCESS)
    from .family_record import family_recording

    scores: list = []
    with family_recording(loaded) as extras:
        recorder.family = extras  # fed by this thread's hooks only (deepstack, linear attention)
        with recording(loaded.model, loaded.adapter, recorder, *taps):
            generated = run_generate(loaded, prepared.inputs, request.max_new_tokens, input_path, scores=scores)
    recorder.processed_scores = scores
    with torch.inference_mode():
        trace = assemble_trace(loaded, request, prepared, recorder, generated, queries, options)
    for extra in extras:  # linear-attention layers (Qwen3.5), deepstack (Qwen3-VL)
        extra.attach(trace, loaded, prepared)
    trace.meta.input_path = input_path
    return trace


def query_rows(queries: str | list[int], prompt_len: int) -> list[int]:
    """Prompt positions whose attention rows are kept: "gen" → the last one, "all" → every one, or a list."""
    if queries == "gen":
        return [prompt_len - 1]
    if queries == "all":
        return list(range(prompt_len))
    if isinstance(queries, str):
        from qdebug.errors import InputError

        raise InputError(f"--queries {queries}: expected gen, all or a list of prompt positions")
    rows = sorted({p + prompt_len if p < 0 else p for p in queries})
    if any(not 0 <= p < prompt_len for p in rows):
        from qdebug.errors import InputError

        raise InputError(f"--queries {','.join(map(str, queries))}: expected prompt positions in 0..{prompt_len - 1}")
    return rows
