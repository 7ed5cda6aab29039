"""What a diff of an ONNX export against the PyTorch reference means: stages the export does not expose, and a
finding that explains the first divergent stage from what was observed (graph inputs, per-stage differences).

ONNX_TOLERANCE: onnxruntime fuses and reorders float32 sums, so an exact export still differs from PyTorch by a
few ulp of the largest value; measured on the demo model: max |diff| 5.7e-6 (hidden states, |h| ~ 10) and
4.8e-6 (logits). A stage agrees when max |a-b| <= 1e-5 + 1e-4·max|a|; real export faults (a transposed weight,
wrong position ids, missing deepstack) move values by 0.1 and more.
"""

from __future__ import annotations

from qdebug.findings import Finding
from qdebug.vocab import FindingKind, Severity, StageName, StageVerdict, is_layer_stage, is_step_stage, layer_stage, stage_number

ONNX_TOLERANCE = (1e-5, 1e-4)  # (atol, rtol) for float32 exports


def _stage(result, name):
    return next((s for s in result.stages if s.name == name), None)


def _before(result, name):
    names = [s.name for s in result.stages]
    i = names.index(name)
    return next((s for s in reversed(result.stages[:i]) if s.verdict != StageVerdict.MISSING and s.name != StageName.PREPROCESS), None)


def mark_unexposed(result, exposed: list[str]) -> None:
    """Stages the export's graphs do not expose are `missing`, said so, rather than compared or called ok."""
    for s in result.stages:
        if s.name in (StageName.PREPROCESS,) or is_step_stage(s.name) or s.name in exposed:
            continue
        s.verdict, s.detail = StageVerdict.MISSING, "not exposed by the export's graphs"
        s.max_abs = s.rel = s.cosine = float("nan")
        s.token_index = s.token_kind = None
        s.top_tokens = []
    if result.first_divergence is not None and result.first_divergence.verdict == StageVerdict.MISSING:
        result.first_divergence = next((s for s in result.stages if s.verdict == StageVerdict.DIVERGED), None)
        result.findings = [f for f in result.findings if f.kind != FindingKind.FIRST_DIVERGENCE or result.first_divergence is not None and f.stage == result.first_divergence.name]


def _within(result, s) -> bool:
    """Whether a stage's values (not its verdict, which position ids may have set) are within tolerance."""
    scale = s.max_abs / s.rel if s.rel else 0.0
    return s.max_abs == 0 or result.tolerance.allows(s.max_abs, scale)


def _where(s) -> str:
    most = ", ".join(f"{t['index']} ({t['kind']})" for t in s.top_tokens[:3]) if s.top_tokens else ""
    return f"max |diff| {s.max_abs:.3g}" + (f", most-moved tokens {most}" if most else "")


def explain_onnx(result, run) -> list[Finding]:
    """Findings that say why the first divergent stage is where the export parts (appended to `result.findings`)."""
    out: list[Finding] = []
    first = result.first_divergence
    layer0 = _stage(result, layer_stage(0))
    sync = _stage(result, StageName.SYNC)
    if run.position_input == "text":
        emb = f"the merged embeddings agree ({_where(sync)})" if sync and _within(result, sync) else "the merged embeddings differ too"
        then = f"; layer.0 is the first stage computed with them ({_where(layer0)})" if layer0 and layer0.verdict == StageVerdict.DIVERGED else ""
        out.append(Finding(kind=FindingKind.POSITION_IDS, severity=Severity.ERROR, stage=StageName.SYNC,
                           message=f"the export's position_ids input is {run.position_shape} (rank 2): it takes 1-D text positions, so the MRoPE (t, h, w) "
                                   f"ids never reach it. sync is where the decoder's inputs part: {emb}, the position ids do not{then}"))
    elif run.position_input == "none" and StageName.LOGITS in run.exposed:
        out.append(Finding(kind=FindingKind.POSITION_IDS, severity=Severity.WARNING, stage=StageName.SYNC,
                           message="the prefill graph has no position_ids input: it computes positions itself, so MRoPE (t, h, w) ids cannot reach it"))
    if run.deepstack_model and not run.deepstack_fed and StageName.LOGITS in run.exposed:
        seen = ""
        if first is not None and first.top_tokens:
            image = sum(1 for t in first.top_tokens if t["kind"] in ("image", "video"))
            seen = (f"; the first divergent stage is {first.name} ({_where(first)}: {image} of the {len(first.top_tokens)} most-moved tokens are image "
                    "tokens, where deepstack adds)")
            if first.name == layer_stage(1) and layer0 is not None and layer0.verdict == StageVerdict.OK:
                seen += (". The additions follow a layer's output, so layer.0's own output is unchanged and layer.1 is the first layer "
                         "output computed from them")
        out.append(Finding(kind=FindingKind.DEEPSTACK, severity=Severity.ERROR, stage=first.name if first else layer_stage(1),
                           message=f"the model's vision tower makes {run.deepstack_model} deepstack feature sets, added to the image rows' hidden states "
                                   f"after decoder layers 0..{run.deepstack_model - 1}, but the prefill graph takes none" + seen))
    if first is not None and is_layer_stage(first.name) and not out:
        prev = _before(result, first.name)
        given = f"its input ({prev.name}) agrees within tolerance" if prev is not None and prev.verdict == StageVerdict.OK else "its input is not compared"
        out.append(Finding(kind=FindingKind.EXPORT_LAYER, severity=Severity.ERROR, stage=first.name, layer=stage_number(first.name),
                           message=f"{first.name} is the first stage the export computes differently: {given} and its output does not ({_where(first)}, "
                                   f"cosine {first.cosine:.4f}); the cause is inside decoder layer {first.name.split('.')[1]} of the export "
                                   "(its weights — e.g. one written transposed — or its attention/MLP/norm ops)"))
    elif first is not None and first.name == StageName.ENCODE:
        out.append(Finding(kind=FindingKind.EXPORT_VISION, severity=Severity.ERROR, stage=StageName.ENCODE,
                           message=f"the vision graph's rows differ from the reference encoder's ({_where(first)}); every later stage inherits it"))
    elif first is not None and first.name == StageName.LOGITS and not out:
        layers = [s for s in result.stages if is_layer_stage(s.name) and s.verdict == StageVerdict.OK]
        message = (f"every exposed layer agrees (up to {layers[-1].name}) but the logits do not ({_where(first)}): the export differs after it"
                   if layers else f"the logits differ ({_where(first)}) and the export exposes no layer outputs: map layer.N outputs to find the layer")
        out.append(Finding(kind=FindingKind.EXPORT_HEAD, severity=Severity.ERROR, stage=StageName.LOGITS, message=message))
    result.findings.extend(out)
    return out


def explain_weights(result, layer: int, layouts: list[dict]) -> list[Finding]:
    """Findings from where decoder layer `layer`'s weights sit in the export (qdebug.export.weights), appended to the result."""
    out: list[Finding] = []
    stage = layer_stage(layer)
    for w in layouts:
        usual = max(w["others"], key=w["others"].get) if w["others"] else None
        name = f"decoder layer {layer}'s {w['name']}"
        if w["layout"] == "rearranged":
            out.append(Finding(kind=FindingKind.EXPORT_WEIGHT, severity=Severity.ERROR, stage=stage, layer=layer,
                               message=f"{name}: the export holds the reference's values only in another order (the same numbers, neither as W nor as Wᵀ): a transposed or reshaped write"))
        elif w["layout"] == "absent":
            out.append(Finding(kind=FindingKind.EXPORT_WEIGHT, severity=Severity.ERROR, stage=stage, layer=layer,
                               message=f"{name}: its values appear nowhere in the export (neither as W, Wᵀ nor rearranged): another weight was written"))
        elif usual in ("W", "Wᵀ") and w["layout"] != usual:
            out.append(Finding(kind=FindingKind.EXPORT_WEIGHT, severity=Severity.ERROR, stage=stage, layer=layer,
                               message=f"{name} is stored as {w['layout']} while the same weight of the other {w['others'][usual]} layer(s) is stored as {usual}: it was written transposed"))
    if layouts and not out:
        out.append(Finding(kind=FindingKind.EXPORT_WEIGHT, severity=Severity.INFO, stage=stage, layer=layer,
                           message=f"every weight matrix of decoder layer {layer} is in the export as in the other layers; the difference is in its ops"))
    result.findings.extend(out)
    return out
