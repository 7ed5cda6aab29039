"""trace(loaded, request) -> Trace: run one request through `generate` with hooks and assemble its stages."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass

from qdebug import __version__
from qdebug.errors import PlaceholderError
from qdebug.findings import Finding

from .hooks import Recorder, recording
from .request import Request
from .schema import Check, ImageInfo, Stage, Step, TopK, Trace
from .stats import best_block_match, fingerprint, tensor_stats, topk_of


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
    try:
        inputs = processor(text=[text], return_tensors="pt", **kwargs)
    except ValueError as exc:  # the processor's own placeholder/image count check
        raise PlaceholderError(f"prompt and images disagree: {str(exc).splitlines()[0]}") from None
    image_token = loaded.adapter.image_token_id(loaded.config)
    spans = placeholder_spans(inputs["input_ids"][0].tolist(), image_token)
    if len(spans) != len(request.images):
        raise PlaceholderError(
            f"the templated prompt has {len(spans)} image placeholder span(s) for {len(request.images)} image(s); "
            "expected one span per image"
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
    with recording(loaded.model, loaded.adapter, recorder, *taps):
        generated = run_generate(loaded, prepared.inputs, request.max_new_tokens, input_path)
    with torch.inference_mode():
        trace = _assemble(loaded, request, prepared, recorder, generated, queries, options)
    trace.meta["input_path"] = input_path
    return trace


def _assemble(loaded, request, prepared, rec: Recorder, generated, queries, options) -> Trace:
    import torch

    tok = loaded.processor.tokenizer
    inputs = prepared.inputs
    ids = inputs["input_ids"][0].tolist()
    merge = loaded.adapter.merge_size(loaded.config)
    grids = inputs.get("image_grid_thw")
    images = []
    for i, (start, end) in enumerate(prepared.spans):
        t, h, w = (int(x) for x in grids[i]) if grids is not None else (1, 0, 0)
        size = request.images[i].size if i < len(request.images) else (0, 0)
        path = request.image_paths[i] if i < len(request.image_paths) else f"<image {i}>"
        images.append(ImageInfo(i, path, tuple(size), (t, h, w), (start, end), h // merge, w // merge))

    tensors: dict = {}
    stages: dict[str, Stage] = {}
    findings: list[Finding] = []
    stages["preprocess"] = Stage(
        "preprocess",
        {
            "text": prepared.text,
            "num_tokens": len(ids),
            "pixel_values_shape": list(inputs["pixel_values"].shape) if "pixel_values" in inputs else None,
            "image_grid_thw": [list(i.grid_thw) for i in images],
            "spans": [list(i.span) for i in images],
        },
        [Check("one placeholder span per image", len(prepared.spans) == len(request.images))],
    )

    # encode: the vision tower's merged rows, split per image.
    encode_rows = []
    if rec.vision_rows is not None:
        sizes = [img.tokens for img in images]
        encode_rows = list(torch.split(rec.vision_rows, sizes)) if sum(sizes) == rec.vision_rows.shape[0] else []
    enc_summary, enc_checks = [], []
    for img, rows in zip(images, encode_rows):
        st = tensor_stats(rows)
        tensors[f"encode.{img.index}"] = rows
        enc_summary.append({"image": img.index, "rows": rows.shape[0], "dim": rows.shape[1], **st, "fingerprint": fingerprint(rows)})
        enc_checks.append(Check(f"image {img.index}: no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf"))
    if rec.vision_rows is not None and not encode_rows:
        enc_checks.append(Check("encoder rows split per image", False, f"{rec.vision_rows.shape[0]} rows for grids {[i.grid_thw for i in images]}"))
    stages["encode"] = Stage("encode", {"images": enc_summary}, enc_checks)

    stages["sync"] = _sync_stage(loaded, images, encode_rows, rec, inputs, tensors)

    for layer in sorted(rec.hidden) or range(len(loaded.adapter.decoder_layers(loaded.model))):
        summary: dict = {"layer": layer}
        checks = []
        if layer in rec.hidden:
            hidden = rec.hidden[layer]
            tensors[f"layer.{layer}.hidden"] = hidden
            st = tensor_stats(hidden)
            summary.update(st)
            checks.append(Check("no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf"))
        if rec.step_hidden.get(layer):
            tensors[f"layer.{layer}.step_hidden"] = torch.stack(rec.step_hidden[layer])
        if rec.attn.get(layer):
            attn = torch.cat(rec.attn[layer], dim=1)
            tensors[f"layer.{layer}.attn"] = attn
            summary["attn_shape"] = list(attn.shape)
        stages[f"layer.{layer}"] = Stage(f"layer.{layer}", summary, checks)

    stages["logits"] = _logits_stage(loaded, rec, ids, tok, options.topk, tensors)

    steps = []
    for k, logits in enumerate(rec.step_logits[: len(generated)]):
        top_ids, top_p, entropy = topk_of(logits, options.topk)
        chosen = generated[k]
        p = float(torch.softmax(logits.float(), -1)[chosen])
        tensors[f"step.{k}.logits"] = logits
        steps.append(
            Step(k, chosen, _tok_text(tok, chosen), p, entropy, TopK(top_ids, [_tok_text(tok, i) for i in top_ids], top_p))
        )
        stages[f"step.{k}"] = Stage(f"step.{k}", {"token": _tok_text(tok, chosen), "token_id": chosen, "prob": p, "entropy": entropy})

    for stage in stages.values():
        for check in stage.checks:
            if not check.ok:
                findings.append(Finding(kind=_kind(check.name), severity="error", message=f"{stage.name}: {check.name} failed ({check.detail})", stage=stage.name))

    prompt_len = len(ids)
    attn_queries = list(queries) + [prompt_len + k for k in range(max(0, len(generated) - 1))]
    meta = {
        "qdebug": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": loaded.describe(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "attn_capture": _attn_note(loaded, options),
        "num_layers": len(loaded.adapter.decoder_layers(loaded.model)),
        "num_heads": int(loaded.adapter.text_config(loaded.config).num_attention_heads),
        "num_kv_heads": int(loaded.adapter.text_config(loaded.config).num_key_value_heads),
        "hidden_size": int(loaded.adapter.text_config(loaded.config).hidden_size),
        "vocab_size": int(loaded.adapter.text_config(loaded.config).vocab_size),
    }
    return Trace(
        meta=meta,
        request={
            "id": request.request_id,
            "prompt": request.prompt_text,
            "images": list(request.image_paths),
            "max_new_tokens": request.max_new_tokens,
        },
        prompt_text=prepared.text,
        input_ids=ids,
        tokens=tok.convert_ids_to_tokens(ids),
        images=images,
        stages=stages,
        steps=steps,
        generated_ids=list(generated),
        generated_text=tok.decode(generated, skip_special_tokens=True),
        attn_queries=attn_queries,
        findings=findings,
        tensors=tensors,
    )


def _sync_stage(loaded, images, encode_rows, rec: Recorder, inputs, tensors) -> Stage:
    """Where each image's rows landed in the merged embeddings, and the MRoPE ids the decoder received."""
    import torch

    checks, per_image = [], []
    embeds = rec.embeds
    if embeds is not None:
        tensors["sync.embeds"] = embeds
    for img, rows in zip(images, encode_rows):
        start, end = img.span
        landed, score = best_block_match(rows, embeds) if embeds is not None else (None, 0.0)
        exact = embeds is not None and end - start == rows.shape[0] and bool(torch.equal(embeds[start:end], rows.to(embeds.dtype)))
        diff = float((embeds[start:end].float() - rows.float()).abs().max()) if embeds is not None and end - start == rows.shape[0] else None
        per_image.append(
            {"image": img.index, "text_offset": start, "visual_offset": landed, "match": score, "rows": rows.shape[0],
             "placeholders": end - start, "expected": img.tokens, "max_abs_diff": diff, "fingerprint": fingerprint(embeds[start:end]) if embeds is not None else None}
        )
        checks.append(Check(f"image {img.index}: rows == placeholders == t·h·w/merge²", rows.shape[0] == end - start == img.tokens,
                            f"{rows.shape[0]} rows, {end - start} placeholders, {img.tokens} expected"))
        checks.append(Check(f"image {img.index}: visual offset == text offset", landed == start, f"visual {landed}, text {start}"))
        checks.append(Check(f"image {img.index}: merged rows equal encode rows", exact, f"max |diff| {diff}"))
    summary: dict = {"images": per_image}
    if rec.position_ids is not None:
        received = rec.position_ids.cpu()
        tensors["sync.position_ids"] = received
        summary["position_ids_shape"] = list(received.shape)
        if "image_grid_thw" in inputs:
            expected, deltas = loaded.adapter.rope_index(
                loaded.model,
                inputs["input_ids"].to(loaded.device),
                inputs["mm_token_type_ids"].to(loaded.device),
                inputs["image_grid_thw"].to(loaded.device),
                inputs["attention_mask"].to(loaded.device),
            )
            expected = expected[:, 0].cpu()
            tensors["sync.expected_position_ids"] = expected
            summary["rope_deltas"] = [int(d) for d in deltas.view(-1).tolist()]
            same = expected.shape == received.shape and bool(torch.equal(expected, received))
            checks.append(Check("MRoPE position ids == get_rope_index", same,
                                "identical" if same else f"{int((expected != received).any(0).sum()) if expected.shape == received.shape else 'shape'} positions differ"))
    return Stage("sync", summary, checks)


def _logits_stage(loaded, rec: Recorder, ids, tok, k: int, tensors) -> Stage:
    """Top-k and entropy at every prompt position, from the model's own lm_head on the final hidden states."""
    import torch

    if rec.final_hidden is None:
        return Stage("logits", {})
    head = loaded.adapter.lm_head(loaded.model)
    top_ids, top_p, ent = [], [], []
    for chunk in torch.split(rec.final_hidden, 256):
        logp = torch.log_softmax(head(chunk).float(), -1)
        p = logp.exp()
        vals, idx = p.topk(min(k, p.shape[-1]), dim=-1)
        top_ids.append(idx)
        top_p.append(vals)
        ent.append(-(p * logp).nan_to_num().sum(-1))
    tensors["logits.topk_ids"] = torch.cat(top_ids).cpu()
    tensors["logits.topk_probs"] = torch.cat(top_p).cpu()
    tensors["logits.entropy"] = torch.cat(ent).cpu()
    last = tensors["logits.topk_ids"][-1].tolist()
    return Stage("logits", {"positions": len(ids), "k": k, "last_topk": [_tok_text(tok, i) for i in last]})


def _tok_text(tok, token_id: int) -> str:
    return tok.decode([token_id], skip_special_tokens=False)


def _kind(check_name: str) -> str:
    name = check_name.split(": ", 1)[-1]
    if "visual offset" in name:
        return "desync"
    if "placeholders" in name or "placeholder span" in name:
        return "shape_mismatch"
    if "MRoPE" in name:
        return "position_ids"
    if "NaN" in name:
        return "nan_inf"
    if "encode rows" in name:
        return "fingerprint"
    return "check_failed"


def _attn_note(loaded, options) -> str:
    layers = "all layers" if options.attn_layers is None else f"layers {sorted(options.attn_layers)}"
    if loaded.kernel == "eager":
        return f"attention weights recorded from the eager kernel in {layers}"
    return f"attention capture forced the eager kernel in {layers} (the model runs {loaded.kernel} elsewhere)"
