"""Deepstack detector (Qwen3-VL): features landing outside an image's placeholder span, on the wrong layers, or missing."""

from __future__ import annotations

from qdebug.findings import Finding
from qdebug.vocab import FindingKind, Severity, layer_stage


def deepstack_findings(trace) -> list[Finding]:
    """Findings from `meta.deepstack` (what was observed added between decoder layers) and the image spans."""
    info = trace.meta.deepstack
    if not info or not trace.images:
        return []
    levels = info["levels"]
    expected = set(range(len(levels)))  # the model adds level i after decoder layer i
    placeholders = set(trace.image_positions())
    by_layer = {r["layer"]: r for r in info["layers"]}
    out: list[Finding] = []
    missing = sorted(l for l in expected if not by_layer.get(l, {}).get("added"))
    if missing:
        why = (" (the decoder was handed no deepstack features: an inputs_embeds path drops them, so the layers after "
               f"{', '.join(layer_stage(l) for l in missing)} differ from a token-ids run; `diff --vary paths` parts at {layer_stage(missing[0] + 1)})"
               if info.get("features_handed", 0) == 0 else "")
        out.append(Finding(kind=FindingKind.DEEPSTACK, severity=Severity.ERROR, stage=layer_stage(missing[0]), layer=missing[0],
                           message=f"deepstack features missing after {', '.join(layer_stage(l) for l in missing)} "
                                   f"(expected vision levels {levels} added after layers {sorted(expected)}){why}"))
    for r in info["layers"]:
        if not r["added"]:
            continue
        layer = r["layer"]
        if layer not in expected:
            out.append(Finding(kind=FindingKind.DEEPSTACK, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
                               message=f"deepstack features added after {layer_stage(layer)}, expected only after layers {sorted(expected)}"))
        elif r.get("level") is not None and r["level"] != levels[layer]:
            out.append(Finding(kind=FindingKind.DEEPSTACK, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
                               message=f"{layer_stage(layer)} got vision level {r['level']}, expected level {levels[layer]}"))
        outside = sorted(set(r["rows"]) - placeholders)
        if outside:
            out.append(Finding(kind=FindingKind.DEEPSTACK, severity=Severity.ERROR, stage=layer_stage(layer), layer=layer,
                               message=f"deepstack rows after {layer_stage(layer)} landed outside the image placeholder spans at "
                                       f"{len(outside)} position(s), first {outside[:5]}"))
        elif set(r["rows"]) != placeholders:
            out.append(Finding(kind=FindingKind.DEEPSTACK, severity=Severity.WARNING, stage=layer_stage(layer), layer=layer,
                               message=f"deepstack after {layer_stage(layer)} reached {len(r['rows'])} of {len(placeholders)} image rows"))
    return out
