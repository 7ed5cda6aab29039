"""Assemble a Trace from what a Recorder captured: stage summaries, checks, tensors and findings."""

from __future__ import annotations

import datetime as _dt

from qdebug import __version__
from qdebug.findings import Finding
from qdebug.vocab import FindingKind, Severity

from .hooks import Recorder, not_recording, to_cpu
from .meta import TraceMeta
from .input_checks import context_limit, image_digest, input_findings
from .processors import active_processors
from .schema import Check, ImageInfo, Stage, Step, TopK, Trace
from .tensor_names import TensorKind as T, tensor_name
from .stats import best_block_match, fingerprint, tensor_stats, topk_of

SAME_ROWS = 1 - 1e-4  # mean cosine at which a block of rows counts as the image's own encoder rows


def assemble_trace(loaded, request, prepared, rec: Recorder, generated, queries, options, reached: list[str] | None = None) -> Trace:
    """Build the Trace of a run (prompt `queries` are the positions whose attention rows were kept).

    For a run paused mid-way pass `reached` (the stages so far) and `generated=None`: the trace then holds
    only those stages, and each step's token is the greedy choice of its logits.
    """
    import torch

    rec.flush()  # nothing below reads a device tensor
    if generated is None:
        generated = [int(logits.argmax()) for logits in rec.step_logits]

    tok = loaded.processor.tokenizer
    inputs = prepared.inputs
    ids = inputs["input_ids"][0].tolist()
    merge = loaded.adapter.merge_size(loaded.config)
    grids = inputs.get("image_grid_thw")
    images = []
    audio = loaded.adapter.modality == "audio"
    for i, (start, end) in enumerate([] if audio else prepared.spans):
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
        [Check("one placeholder span per image", len(prepared.spans) == len(request.images), kind=FindingKind.SHAPE_MISMATCH)],
    )

    # encode: the vision tower's merged rows, split per image.
    encode_rows = []
    if rec.vision_rows is not None:
        sizes = [img.tokens for img in images]
        encode_rows = list(torch.split(rec.vision_rows, sizes)) if sum(sizes) == rec.vision_rows.shape[0] else []
    enc_summary, enc_checks = [], []
    for img, rows in zip(images, encode_rows):
        st = tensor_stats(rows)
        tensors[tensor_name(T.ENCODE, image=img.index)] = rows
        enc_summary.append({"image": img.index, "rows": rows.shape[0], "dim": rows.shape[1], **st, "fingerprint": fingerprint(rows)})
        enc_checks.append(Check(f"image {img.index}: no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf", "nan_inf"))
    if rec.vision_rows is not None and not encode_rows:
        enc_checks.append(Check("encoder rows split per image", False, f"{rec.vision_rows.shape[0]} rows for grids {[i.grid_thw for i in images]}"))
    stages["encode"] = Stage("encode", {"images": enc_summary}, enc_checks)

    stages["sync"] = _sync_stage(loaded, images, encode_rows, rec, inputs, tensors)
    if audio:  # audio families replace the three input stages (same names, clip-shaped contents)
        from .audio_stages import audio_stages

        audio_three, audio_meta = audio_stages(loaded, request, prepared, rec, tensors)
        stages.update(audio_three)

    n_layers = len(loaded.adapter.decoder_layers(loaded.model))
    for layer in sorted(set(rec.hidden) | set(rec.hidden_stats)) or range(n_layers):
        summary: dict = {"layer": layer}
        checks = []
        st = rec.hidden_stats.get(layer)
        if layer in rec.hidden:
            tensors[tensor_name(T.LAYER_HIDDEN, layer=layer)] = rec.hidden[layer]
            st = st or tensor_stats(rec.hidden[layer])
        if layer in rec.hidden_kept:
            tensors[tensor_name(T.LAYER_LAST, layer=layer)] = rec.hidden_kept[layer]  # the last prompt row (rows × dim)
        if st is not None:
            summary.update(st)
            checks.append(Check("no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf", "nan_inf"))
        if rec.step_hidden.get(layer):
            tensors[tensor_name(T.LAYER_STEP_HIDDEN, layer=layer)] = torch.stack(rec.step_hidden[layer])
        if rec.attn.get(layer):
            attn = torch.cat(rec.attn[layer], dim=1)
            tensors[tensor_name(T.LAYER_ATTN, layer=layer)] = attn
            summary["attn_shape"] = list(attn.shape)
        stages[f"layer.{layer}"] = Stage(f"layer.{layer}", summary, checks)

    if getattr(options, "prompt_logits", True) or not rec.step_logits:
        stages["logits"] = _logits_stage(loaded, rec, ids, tok, options.topk, tensors)
    else:  # the last prompt position's logits are step 0's: no lm_head pass over the whole prompt
        last = topk_of(rec.step_logits[0], options.topk)[0]
        stages["logits"] = Stage("logits", {"positions": len(ids), "k": options.topk, "last_topk": [_tok_text(tok, i) for i in last],
                                            "prompt_topk": "last position only"})

    steps = []
    processed = getattr(rec, "processed_scores", None) or []
    for k, logits in enumerate(rec.step_logits[: len(generated)]):
        chosen = generated[k]
        raw_ids, raw_p, raw_entropy = topk_of(logits, options.topk)
        raw_prob = float(torch.softmax(logits.float(), -1)[chosen])
        scores = processed[k] if k < len(processed) and processed[k].shape == logits.shape else logits
        top_ids, top_p, entropy = topk_of(scores, options.topk)
        p = float(torch.softmax(scores.float(), -1)[chosen])
        tensors[tensor_name(T.STEP_LOGITS, step=k)] = logits
        steps.append(
            Step(k, chosen, _tok_text(tok, chosen), p, entropy, TopK(top_ids, [_tok_text(tok, i) for i in top_ids], top_p),
                 raw_topk=TopK(raw_ids, [_tok_text(tok, i) for i in raw_ids], raw_p), raw_prob=raw_prob)
        )
        stages[f"step.{k}"] = Stage(f"step.{k}", {"token": _tok_text(tok, chosen), "token_id": chosen, "prob": p, "entropy": entropy,
                                                  "raw_prob": raw_prob, "raw_entropy": raw_entropy})

    for stage in stages.values():
        for check in stage.checks:
            if not check.ok:
                findings.append(Finding(kind=check.kind, severity=Severity.ERROR, message=f"{stage.name}: {check.name} failed ({check.detail})", stage=stage.name))

    findings.extend(input_findings(request, len(ids), context_limit(loaded.adapter.text_config(loaded.config))))
    prompt_len = len(ids)
    attn_queries = list(queries) + [prompt_len + k for k in range(max(0, len(generated) - 1))]
    text_config = loaded.adapter.text_config(loaded.config)
    meta = TraceMeta(
        qdebug=__version__,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        model=loaded.describe(),
        torch=torch.__version__,
        transformers=__import__("transformers").__version__,
        attn_capture=_attn_note(loaded, options, sorted(rec.attn)),
        layers_captured=sorted(rec.attn),
        queries=options.queries if isinstance(options.queries, str) else list(options.queries),
        keep_hidden=bool(options.keep_hidden),
        processors=active_processors(loaded.model.generation_config) if processed else [],
        num_layers=n_layers,
        num_heads=int(text_config.num_attention_heads),
        num_kv_heads=int(text_config.num_key_value_heads),
        hidden_size=int(text_config.hidden_size),
        vocab_size=int(text_config.vocab_size),
        audio=audio_meta if audio else None,
    )
    if reached is not None:
        keep = set(reached)
        stages = {name: stage for name, stage in stages.items() if name in keep}
        findings = [f for f in findings if f.stage in keep]
    return Trace(
        meta=meta,
        request={
            "id": request.request_id,
            "prompt": request.prompt_text,
            "images": list(request.image_paths),
            "max_new_tokens": request.max_new_tokens,
            "image_sha256": [image_digest(im) for im in request.images],  # diff's same-request check
            **({"audio": list(request.audio_paths)} if audio else {}),
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
        tensors[tensor_name(T.SYNC_EMBEDS)] = embeds
    for img, rows in zip(images, encode_rows):
        start, end = img.span
        landed, score = _landed(rows, embeds, start, end)
        if score < SAME_ROWS:  # the image's own rows are nowhere in the stream: it got someone else's
            landed = None
        exact = embeds is not None and end - start == rows.shape[0] and bool(torch.equal(embeds[start:end], rows.to(embeds.dtype)))
        diff = float((embeds[start:end].float() - rows.float()).abs().max()) if embeds is not None and end - start == rows.shape[0] else None
        per_image.append(
            {"image": img.index, "text_offset": start, "visual_offset": landed, "match": score, "rows": rows.shape[0],
             "placeholders": end - start, "expected": img.tokens, "max_abs_diff": diff, "fingerprint": fingerprint(embeds[start:end]) if embeds is not None else None}
        )
        checks.append(Check(f"image {img.index}: rows == placeholders == t·h·w/merge²", rows.shape[0] == end - start == img.tokens,
                            f"{rows.shape[0]} rows, {end - start} placeholders, {img.tokens} expected", FindingKind.SHAPE_MISMATCH))
        checks.append(Check(f"image {img.index}: visual offset == text offset", landed == start,
                            f"visual {landed}, text {start}" if landed is not None else f"its rows are not in the stream (text {start})", FindingKind.DESYNC))
        checks.append(Check(f"image {img.index}: merged rows equal encode rows", exact, f"max |diff| {diff}", "fingerprint"))
    summary: dict = {"images": per_image}
    if rec.position_ids is not None:
        received = rec.position_ids.cpu()
        tensors[tensor_name(T.SYNC_POSITION_IDS)] = received
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
            tensors[tensor_name(T.SYNC_EXPECTED_POSITION_IDS)] = expected
            summary["rope_deltas"] = [int(d) for d in deltas.view(-1).tolist()]
            same = expected.shape == received.shape and bool(torch.equal(expected, received))
            checks.append(Check("MRoPE position ids == get_rope_index", same,
                                "identical" if same else f"{int((expected != received).any(0).sum()) if expected.shape == received.shape else 'shape'} positions differ",
                                "position_ids"))
    return Stage("sync", summary, checks)


def _landed(rows, embeds, start: int, end: int):
    """(where the image's rows landed, match score): its own span first, so the same image twice in one
    request is found at each copy's own place; elsewhere only when its span does not hold them."""
    if embeds is None:
        return None, 0.0
    if end - start == rows.shape[0]:
        own = float(torch_cosine_rows(rows, embeds[start:end]))
        if own >= SAME_ROWS:
            return start, own
    return best_block_match(rows, embeds)


def torch_cosine_rows(a, b):
    """Mean row-by-row cosine similarity of two `n × dim` blocks."""
    import torch

    return torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).mean()


def _logits_stage(loaded, rec: Recorder, ids, tok, k: int, tensors) -> Stage:
    """Top-k and entropy at every prompt position, from the model's own lm_head on the final hidden states."""
    import torch

    if rec.final_hidden is None:
        return Stage("logits", {})
    head = loaded.adapter.lm_head(loaded.model)
    top_ids, top_p, ent = [], [], []
    device = head.weight.device
    for chunk in torch.split(rec.final_hidden, 64):  # 64 rows × vocab × float32 at a time: ~0.1 GiB at Qwen's vocab
        with not_recording():  # a paused run's recorder is still active in this thread
            logits = head(chunk.to(device))
        # On the head's device: only the top-k and the entropy cross to CPU, never rows × vocab.
        logp = torch.log_softmax(logits.float(), -1)
        p = logp.exp()
        vals, idx = p.topk(min(k, p.shape[-1]), dim=-1)
        top_ids.append(to_cpu(idx))
        top_p.append(to_cpu(vals))
        ent.append(to_cpu(-(p * logp).nan_to_num().sum(-1)))
    tensors[tensor_name(T.LOGITS_TOPK_IDS)] = torch.cat(top_ids).cpu()
    tensors[tensor_name(T.LOGITS_TOPK_PROBS)] = torch.cat(top_p).cpu()
    tensors[tensor_name(T.LOGITS_ENTROPY)] = torch.cat(ent).cpu()
    last = tensors[tensor_name(T.LOGITS_TOPK_IDS)][-1].tolist()
    return Stage("logits", {"positions": len(ids), "k": k, "last_topk": [_tok_text(tok, i) for i in last]})


def _tok_text(tok, token_id: int) -> str:
    return tok.decode([token_id], skip_special_tokens=False)


def _attn_note(loaded, options, captured: list[int]) -> str:
    """Which layers recorded weights, and which kernel computed every layer's output."""
    if not captured:
        return f"no attention weights recorded; every layer ran {loaded.kernel}"
    n = len(loaded.adapter.decoder_layers(loaded.model))
    layers = "all layers" if len(captured) == n else f"layers {captured}"
    if loaded.kernel == "eager":
        return f"attention weights recorded from the eager kernel in {layers} (eager everywhere)"
    return (f"every layer ran {loaded.kernel}; attention weights in {layers} computed by the eager formula "
            f"for the kept query rows only")
