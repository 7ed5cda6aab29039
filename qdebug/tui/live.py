"""What is known so far about a run paused at a stage: a partial Trace built from the live Recorder.

Runs in the stepper's worker thread while the forward pass waits (so the recorder's tensors are stable).
Only public helpers are used; the complete trace with every check replaces this snapshot when the run ends.
"""

from __future__ import annotations

from qdebug.trace.schema import Check, ImageInfo, Stage, Step, TopK, Trace
from qdebug.trace.stats import best_block_match, fingerprint, tensor_stats, topk_of

PARTIAL_NOTE = "live snapshot: the complete checks arrive when the run finishes"


def _images(loaded, request, prepared) -> list[ImageInfo]:
    merge = loaded.adapter.merge_size(loaded.config)
    grids = prepared.inputs.get("image_grid_thw")
    out = []
    for i, (start, end) in enumerate(prepared.spans):
        t, h, w = (int(x) for x in grids[i]) if grids is not None else (1, 0, 0)
        size = request.images[i].size if i < len(request.images) else (0, 0)
        path = request.image_paths[i] if i < len(request.image_paths) else f"<image {i}>"
        out.append(ImageInfo(i, path, tuple(size), (t, h, w), (start, end), h // merge, w // merge))
    return out


def _nan_check(st: dict, prefix: str = "") -> Check:
    return Check(f"{prefix}no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf")


def snapshot(loaded, request, prepared, recorder, reached: list[str]) -> Trace:
    """A Trace holding the stages in `reached` as far as the recorder has them (steps chosen greedily)."""
    import torch

    tok = loaded.processor.tokenizer
    ids = prepared.inputs["input_ids"][0].tolist()
    images = _images(loaded, request, prepared)
    done = set(reached)
    tensors: dict = {}
    stages: dict[str, Stage] = {
        "preprocess": Stage(
            "preprocess",
            {"text": prepared.text, "num_tokens": len(ids),
             "pixel_values_shape": list(prepared.inputs["pixel_values"].shape) if "pixel_values" in prepared.inputs else None,
             "image_grid_thw": [list(i.grid_thw) for i in images], "spans": [list(s) for s in prepared.spans]},
            [Check("one placeholder span per image", len(prepared.spans) == len(request.images))],
        )
    }
    rec = recorder
    rows_per_image = []
    if rec is not None and "encode" in done and rec.vision_rows is not None:
        sizes = [img.tokens for img in images]
        if sum(sizes) == rec.vision_rows.shape[0]:
            rows_per_image = list(torch.split(rec.vision_rows, sizes))
        summary, checks = [], []
        for img, rows in zip(images, rows_per_image):
            st = tensor_stats(rows)
            tensors[f"encode.{img.index}"] = rows
            summary.append({"image": img.index, "rows": rows.shape[0], "dim": rows.shape[1], **st, "fingerprint": fingerprint(rows)})
            checks.append(_nan_check(st, f"image {img.index}: "))
        stages["encode"] = Stage("encode", {"images": summary, "note": PARTIAL_NOTE}, checks)
    if rec is not None and "sync" in done:
        stages["sync"] = _sync(rec, images, rows_per_image, tensors)
    for name in reached:
        if name.startswith("layer.") and rec is not None:
            layer = int(name.split(".")[1])
            summary, checks = {"layer": layer}, []
            if layer in rec.hidden:
                tensors[f"layer.{layer}.hidden"] = rec.hidden[layer]
                st = tensor_stats(rec.hidden[layer])
                summary.update(st)
                checks.append(_nan_check(st))
            stages[name] = Stage(name, summary, checks)
    steps, attn_rows = [], None
    if rec is not None:
        for k, logits in enumerate(rec.step_logits):
            if f"step.{k}" not in done and not (k == 0 and "logits" in done):
                break
            top_ids, top_p, entropy = topk_of(logits, 5)
            chosen = int(logits.argmax())  # qdebug generates greedily
            p = float(torch.softmax(logits.float(), -1)[chosen])
            tensors[f"step.{k}.logits"] = logits
            if f"step.{k}" in done:
                steps.append(Step(k, chosen, tok.decode([chosen]), p, entropy, TopK(top_ids, [tok.decode([i]) for i in top_ids], top_p)))
                stages[f"step.{k}"] = Stage(f"step.{k}", {"token": steps[-1].token, "token_id": chosen, "prob": p, "entropy": entropy})
            if k == 0 and "logits" in done:
                stages["logits"] = Stage("logits", {"positions": len(ids), "k": 5, "last_topk": [tok.decode([i]) for i in top_ids], "note": PARTIAL_NOTE})
        attn_rows = _attention(rec, tensors, stages)
    image_set = {p for s, e in prepared.spans for p in range(s, e)}
    queries = [p for p in range(len(ids)) if p not in image_set]
    queries += [len(ids) + k for k in range(max(0, len(steps) - 1))]
    if attn_rows is not None:
        queries = queries[:attn_rows]
    ordered = {n: stages[n] for n in ["preprocess", "encode", "sync", *reached] if n in stages}
    return Trace(
        meta={"model": loaded.describe(), "num_layers": len(loaded.adapter.decoder_layers(loaded.model)),
              "num_heads": int(loaded.adapter.text_config(loaded.config).num_attention_heads), "partial": True},
        request={"id": request.request_id, "prompt": request.prompt_text, "images": list(request.image_paths), "max_new_tokens": request.max_new_tokens},
        prompt_text=prepared.text, input_ids=ids, tokens=tok.convert_ids_to_tokens(ids), images=images, stages=ordered,
        steps=steps, generated_ids=[s.token_id for s in steps], generated_text=tok.decode([s.token_id for s in steps], skip_special_tokens=True),
        attn_queries=queries, tensors=tensors,
    )


def _sync(rec, images, rows_per_image, tensors) -> Stage:
    """Where each image's rows landed in the embeddings the decoder received, and its position ids."""
    per_image, checks = [], []
    embeds = rec.embeds
    if embeds is not None:
        tensors["sync.embeds"] = embeds
    for img, rows in zip(images, rows_per_image):
        start, end = img.span
        landed, score = best_block_match(rows, embeds) if embeds is not None else (None, 0.0)
        per_image.append({"image": img.index, "text_offset": start, "visual_offset": landed, "match": score,
                          "rows": rows.shape[0], "placeholders": end - start, "expected": img.tokens})
        checks.append(Check(f"image {img.index}: rows == placeholders == t·h·w/merge²", rows.shape[0] == end - start == img.tokens,
                            f"{rows.shape[0]} rows, {end - start} placeholders, {img.tokens} expected"))
        checks.append(Check(f"image {img.index}: visual offset == text offset", landed == start, f"visual {landed}, text {start}"))
    summary = {"images": per_image, "note": PARTIAL_NOTE}
    if rec.position_ids is not None:
        tensors["sync.position_ids"] = rec.position_ids.cpu()
        summary["position_ids_shape"] = list(rec.position_ids.shape)
    return Stage("sync", summary, checks)


def _attention(rec, tensors, stages) -> int | None:
    """Attention rows recorded so far per layer, trimmed to the count every recorded layer has."""
    import torch

    if not rec.attn:
        return None
    cat = {layer: torch.cat(chunks, dim=1) for layer, chunks in rec.attn.items() if chunks}
    if not cat:
        return None
    rows = min(a.shape[1] for a in cat.values())
    for layer, a in cat.items():
        tensors[f"layer.{layer}.attn"] = a[:, :rows]
        if f"layer.{layer}" in stages:
            stages[f"layer.{layer}"].summary["attn_shape"] = list(a[:, :rows].shape)
    return rows
