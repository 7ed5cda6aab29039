"""First divergence between two traces of the same request: per-stage differences, steps, findings."""

from __future__ import annotations

from dataclasses import dataclass, field

from qdebug.errors import IncompatibleTracesError
from qdebug.findings import Finding
from qdebug.trace.cached import cached_prefix, computed_from
from qdebug.trace.items import trace_items
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import FindingKind, Severity, StageName, StageVerdict, is_layer_stage, is_step_stage, layer_stage, step_stage

from .detectors.divergence import kl, topk_overlap
from .tolerances import Tolerance, tolerance_for


@dataclass
class StageDiff:
    """How far two runs are apart at one stage."""

    name: str
    max_abs: float
    rel: float
    cosine: float
    verdict: str  # "ok" | "diverged" | "missing"
    token_index: int | None = None  # position with the largest difference (sequence stages)
    token_kind: str | None = None  # "image" | "video" | "audio" | "text"
    detail: str = ""
    top_tokens: list = field(default_factory=list)  # [{index, kind, max_abs}] the positions that moved most
    channel: int | None = None  # the channel where the first parting row parts most (beyond tolerance)

    def to_json(self) -> dict:
        """As the `stages` entries of the diff JSON."""
        keys = ("name", "max_abs", "rel", "cosine", "verdict", "token_index", "token_kind", "detail", "top_tokens", "channel")
        return {k: getattr(self, k) for k in keys}


@dataclass
class StepDiff:
    """One generation step compared: tokens, KL(a‖b), top-k overlap."""

    index: int
    a_token: str | None
    b_token: str | None
    kl: float | None
    topk_overlap: float | None
    agree: bool
    a_topk: list = field(default_factory=list)
    b_topk: list = field(default_factory=list)

    def to_json(self) -> dict:
        """As the `steps` entries of the diff JSON."""
        return {
            "index": self.index, "a_token": self.a_token, "b_token": self.b_token, "kl": self.kl,
            "topk_overlap": self.topk_overlap, "agree": self.agree, "a_topk": self.a_topk, "b_topk": self.b_topk,
        }


@dataclass
class DiffResult:
    """The whole comparison of run A and run B."""

    a_label: str
    b_label: str
    tolerance: Tolerance
    stages: list[StageDiff]
    steps: list[StepDiff]
    first_divergence: StageDiff | None
    first_step_apart: int | None
    a_text: str
    b_text: str
    findings: list[Finding]
    images: list = field(default_factory=list)  # per image: span, both runs' visual offsets and attention peaks
    compared_from: int = 0  # the first prompt position both runs computed (an engine run's prefix served from a cache: N)

    def to_json(self) -> dict:
        """The `--json` document."""
        fd = self.first_divergence
        return {
            "a": {"label": self.a_label, "text": self.a_text},
            "b": {"label": self.b_label, "text": self.b_text},
            "tolerance": {"atol": self.tolerance.atol, "rtol": self.tolerance.rtol},
            "stages": [s.to_json() for s in self.stages],
            "first_divergence": {"stage": fd.name, "token_index": fd.token_index, "token_kind": fd.token_kind, "channel": fd.channel} if fd else None,
            "steps": [s.to_json() for s in self.steps],
            "first_step_apart": self.first_step_apart,
            "texts_agree": self.a_text == self.b_text,
            "images": self.images,
            "compared_from": self.compared_from,
            "findings": [f.to_json() for f in self.findings],
        }


def model_signature(trace) -> dict:
    """What must match for two traces to be comparable: architecture and the decoder's shape."""
    m = trace.meta
    return {"architecture": m.model["architecture"], "layers": m.num_layers, "heads": m.num_heads,
            "vocab": m.vocab_size, "hidden": m.hidden_size}


def check_comparable(a, b) -> None:
    """Refuse traces of different requests or models (IncompatibleTracesError naming the difference)."""
    sa, sb = model_signature(a), model_signature(b)
    if sa != sb:
        diff = ", ".join(f"{k} {sa[k]} vs {sb[k]}" for k in sa if sa[k] != sb[k])
        raise IncompatibleTracesError(f"the traces come from different models ({diff}); expected two runs of one model")
    whole = _rows_came_whole(a) or _rows_came_whole(b)  # a prompt_embeds run: its items were merged by its client
    if a.input_ids != b.input_ids or (not whole and _item_grids(a) != _item_grids(b)):
        raise IncompatibleTracesError(
            f"the traces are of different requests ({a.request.prompt!r} with {len(a.input_ids)} tokens vs "
            f"{b.request.prompt!r} with {len(b.input_ids)} tokens); expected the same request twice"
        )
    ha, hb = a.request.image_sha256, b.request.image_sha256
    if ha is not None and hb is not None and ha != hb:  # same ids and grids, other pixels: still another request
        which = next((i for i, (x, y) in enumerate(zip(ha, hb)) if x != y), min(len(ha), len(hb)))
        raise IncompatibleTracesError(
            f"the traces are of different requests (image {which} has other pixels: sha256 {str(ha[which] if which < len(ha) else None)[:12]} "
            f"vs {str(hb[which] if which < len(hb) else None)[:12]}); expected the same request twice"
        )


def _rows_came_whole(trace) -> bool:
    """Whether the run was handed the decoder's input rows themselves (`prompt_embeds`): no media item of its own."""
    return getattr(trace.meta, "input_path", None) == "embeds"


def _item_grids(trace) -> list[tuple]:
    """Each media item's modality and grid (None for a clip), in item order: what two runs of one request share."""
    return [(it.modality, it.grid_thw) for it in trace_items(trace)]


def _compare(a, b, tol: Tolerance, name: str, kinds: list[str] | None = None, offset: int = 0) -> StageDiff:
    import torch

    if a is None or b is None:
        return StageDiff(name, float("nan"), float("nan"), float("nan"), StageVerdict.MISSING, detail="not captured in both runs")
    if a.shape != b.shape:
        return StageDiff(name, float("inf"), float("inf"), 0.0, StageVerdict.DIVERGED, detail=f"shapes differ: {list(a.shape)} vs {list(b.shape)}")
    x, y = a.float(), b.float()
    delta = (x - y).abs()
    max_abs = float(delta.max()) if delta.numel() else 0.0
    scale = float(x.abs().max()) if x.numel() else 0.0
    cos = float(torch.nn.functional.cosine_similarity(x.flatten(), y.flatten(), dim=0)) if x.numel() else 1.0
    rows_a = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    excess = tol.excess(rows_a, y.reshape(rows_a.shape))
    parts = ~(excess <= 0)  # NaN parts too
    bad_rows = parts.any(dim=-1)
    result = StageDiff(name, max_abs, max_abs / scale if scale else max_abs, cos, StageVerdict.DIVERGED if bool(bad_rows.any()) else StageVerdict.OK)
    if x.ndim == 2 and x.shape[0] > 0 and max_abs > 0:
        per_row = delta.max(dim=-1).values
        top = per_row.topk(min(5, per_row.shape[0]))
        result.top_tokens = [
            {"index": int(i) + offset, "kind": kinds[int(i) + offset] if kinds else None, "max_abs": float(v)}
            for v, i in zip(top.values, top.indices) if float(v) > 0
        ]
        result.token_index = result.top_tokens[0]["index"]
        result.token_kind = result.top_tokens[0]["kind"]
    if result.verdict == StageVerdict.DIVERGED:
        row = int(bad_rows.nonzero()[0])
        result.channel = int(excess[row].nan_to_num(nan=float("inf")).argmax())
        if x.ndim == 2:
            result.token_index = row + offset
            result.token_kind = kinds[row + offset] if kinds else None
    return result


def _compare_layer(a, b, tol: Tolerance, layer: int, kinds: list[str], firsts: tuple[int, int] = (0, 0)) -> StageDiff:
    """A decoder layer's prefill output: every row both runs computed when both traces kept them (`firsts`: the
    position each trace's rows start at), else the last prompt row."""
    full_a, full_b = a.tensor_or_none(T.LAYER_HIDDEN, layer=layer), b.tensor_or_none(T.LAYER_HIDDEN, layer=layer)
    if full_a is not None and full_b is not None:
        start = max(firsts)
        return _compare(full_a[start - firsts[0]:], full_b[start - firsts[1]:], tol, layer_stage(layer), kinds, offset=start)
    last_a, last_b = a.tensor_or_none(T.LAYER_LAST, layer=layer), b.tensor_or_none(T.LAYER_LAST, layer=layer)
    if last_a is None and full_a is not None:
        last_a = full_a[-1:]
    if last_b is None and full_b is not None:
        last_b = full_b[-1:]
    if last_a is None or last_b is None:
        return StageDiff(layer_stage(layer), float("nan"), float("nan"), float("nan"), StageVerdict.MISSING, detail="not captured in both runs")
    result = _compare(last_a, last_b, tol, layer_stage(layer), kinds, offset=len(kinds) - last_a.shape[0])
    result.detail = "last prompt row only (a trace was saved without --keep hidden); other rows not compared"
    return result


def _encoder_rows_at_positions(stage: StageDiff, positions: list[int], kinds: list[str]) -> StageDiff:
    """Name the encode stage's rows by the sequence position each one fills, as every other stage names its tokens.

    The encoder's rows, image by image (clip by clip), are the placeholders in order (`positions`: those of the rows
    compared); without that mapping a row number would read as a position and its kind would be unknown (None in the
    report).
    """
    rows = [t["index"] for t in stage.top_tokens] + ([stage.token_index] if stage.token_index is not None else [])
    if not rows or max(rows) >= len(positions):  # rows that fill no placeholder: leave them unnamed rather than guess
        stage.token_index, stage.token_kind, stage.top_tokens = None, None, []
        return stage
    stage.top_tokens = [{**t, "index": positions[t["index"]], "kind": kinds[positions[t["index"]]]} for t in stage.top_tokens]
    if stage.token_index is not None:
        stage.token_index = positions[stage.token_index]
        stage.token_kind = kinds[stage.token_index]
    return stage


def _token_kinds(trace) -> list[str]:
    items = trace_items(trace)
    kind = {p: it.modality for it in items for s, e in it.runs for p in range(s, e)}  # image, video or audio: what the row is
    return [kind.get(p, "text") for p in range(len(trace.input_ids))]


def diff_traces(a, b, *, atol: float | None = None, rtol: float | None = None, a_label: str = "A", b_label: str = "B", extra_findings=()) -> DiffResult:
    """Compare two traces stage by stage in canonical order and find the first divergence."""
    import torch

    check_comparable(a, b)
    tol = tolerance_for(a.meta.model["dtype"], b.meta.model["dtype"], atol, rtol, engine=bool(a.meta.engine or b.meta.engine))
    kinds = _token_kinds(a)
    stages: list[StageDiff] = []
    findings: list[Finding] = list(extra_findings)

    stages.append(StageDiff(StageName.PREPROCESS, 0.0, 0.0, 1.0, StageVerdict.OK, detail="same input ids and image grids"))
    firsts = (computed_from(a), computed_from(b))  # where each trace's rows start (an engine's prefix served from a cache)
    start = max(firsts)
    # one encode tensor per media item (image, video, clip; Qwen2.5-Omni's mixed items each at its own encoder), at the
    # placeholders both runs computed: an item an engine's prefix cache served whole was not encoded in that run (left
    # out, and said), one served in part is compared at its rows after the cached positions
    items_a, items_b = trace_items(a), trace_items(b)
    skips = [sum(1 for p in it.positions if p < start) for it in items_a]
    whole = {it.item for it, skip in zip(items_a, skips) if skip and skip >= len(it.positions)}
    kept = [(it, skip) for it, skip in zip(items_a, skips) if it.item not in whole]
    enc_a, enc_b = ([_tail(t.tensor_or_none(T.ENCODE, item=it.item), skip) for it, skip in kept] for t in (a, b))
    if len(items_a) != len(items_b):  # one run was handed its rows whole (prompt_embeds): it ran no encoder
        stages.append(StageDiff(StageName.ENCODE, float("nan"), float("nan"), float("nan"), StageVerdict.MISSING,
                                detail=f"media items {len(items_a)} vs {len(items_b)}: one run was given its input rows whole"))
    elif enc_a and all(t is not None for t in enc_a + enc_b):
        positions = [p for it, skip in kept for p in it.positions[skip:]]
        encode = _encoder_rows_at_positions(_compare(torch.cat(enc_a), torch.cat(enc_b), tol, StageName.ENCODE), positions, kinds)
        if whole:
            encode.detail = "; ".join(d for d in (encode.detail, f"items {', '.join(str(i) for i in sorted(whole))} not compared: "
                                                                   "served whole from a prefix cache") if d)
        stages.append(encode)
    elif whole and not kept:  # every item served from a prefix cache: nothing encoded
        stages.append(StageDiff(StageName.ENCODE, float("nan"), float("nan"), float("nan"), StageVerdict.MISSING,
                                detail="every media item was served whole from a prefix cache: none encoded in that run"))
    else:
        stages.append(StageDiff(StageName.ENCODE, 0.0, 0.0, 1.0, StageVerdict.OK, detail="no images"))

    sync = _compare(_rows(a, T.SYNC_EMBEDS, firsts[0], start), _rows(b, T.SYNC_EMBEDS, firsts[1], start), tol, StageName.SYNC, kinds, offset=start)
    pa, pb = _columns(a, firsts[0], start), _columns(b, firsts[1], start)
    positions_only = False  # the sync rows agree and only the position ids differ
    if pa is not None and pb is not None and not torch.equal(pa, pb):
        positions_only = sync.verdict == StageVerdict.OK
        moved = (pa != pb).any(0) if pa.shape == pb.shape else None
        count = int(moved.sum()) if moved is not None else "all"
        moved_at = int(moved.nonzero()[0]) if moved is not None and moved.any() else None
        sync.verdict = StageVerdict.DIVERGED
        sync.detail = (f"position ids the decoder received differ at {count} positions"
                       + (f" (first at {moved_at + start}: A (t,h,w)={pa[:, moved_at].tolist()}, B={pb[:, moved_at].tolist()})" if moved_at is not None else ""))
        moved_at = moved_at + start if moved_at is not None else None
        if moved_at is not None and sync.max_abs == 0:
            sync.token_index, sync.token_kind = moved_at, kinds[moved_at]
        b_text_only = pb.shape == pa.shape and bool((pb[0] == pb[1]).all() and (pb[1] == pb[2]).all())
        findings.append(Finding(
            kind=FindingKind.POSITION_IDS, severity=Severity.ERROR, stage=StageName.SYNC,
            message=sync.detail + (": B got plain 1-D text positions, not the MRoPE (t, h, w) ids" if b_text_only else ""),
        ))
    stages.append(sync)

    for layer in range(a.meta.num_layers):
        stages.append(_compare_layer(a, b, tol, layer, kinds, firsts))
    stages.append(_compare(a.tensor_or_none(T.STEP_LOGITS, step=0), b.tensor_or_none(T.STEP_LOGITS, step=0), tol, StageName.LOGITS))

    steps: list[StepDiff] = []
    first_apart = None
    for k in range(max(len(a.steps), len(b.steps))):
        sa = a.steps[k] if k < len(a.steps) else None
        sb = b.steps[k] if k < len(b.steps) else None
        la, lb = a.tensor_or_none(T.STEP_LOGITS, step=k), b.tensor_or_none(T.STEP_LOGITS, step=k)
        both = la is not None and lb is not None and la.shape == lb.shape
        overlap = None
        if sa and sb:
            overlap = topk_overlap(sa.topk.token_ids, sb.topk.token_ids)
        agree = bool(sa and sb and sa.token_id == sb.token_id)
        steps.append(StepDiff(k, sa.token if sa else None, sb.token if sb else None, kl(la, lb) if both else None, overlap, agree,
                              sa.topk.rows() if sa else [], sb.topk.rows() if sb else []))
        stages.append(_compare(la, lb, tol, step_stage(k)) if both else StageDiff(step_stage(k), float("nan"), float("nan"), float("nan"), StageVerdict.MISSING, detail="generated by one run only"))
        if not agree and first_apart is None:
            first_apart = k

    if start:
        findings.append(_cached_finding(a, b, firsts, whole))
    partial = [s.name for s in stages if is_layer_stage(s.name) and s.detail.startswith("last prompt row only")]
    if partial:
        findings.append(Finding(kind=FindingKind.PARTIAL_COMPARISON, severity=Severity.INFO, stage=partial[0],
                                message=f"{len(partial)} layer(s) compared at the last prompt row only: a trace was saved without "
                                        "--keep hidden, so the other prompt rows could not be compared"))
    missing = [s.name for s in stages if s.verdict == StageVerdict.MISSING and not is_step_stage(s.name)]
    if missing:
        findings.append(Finding(kind=FindingKind.PARTIAL_COMPARISON, severity=Severity.INFO, stage=missing[0],
                                message=f"not captured in both runs, so not compared: {', '.join(missing)}"))
    first = next((s for s in stages if s.verdict == StageVerdict.DIVERGED), None)
    if first is not None:
        where = f" at token {first.token_index}" + (f" ({first.token_kind})" if first.token_kind else "") if first.token_index is not None else ""
        where += f", channel {first.channel}" if first.channel is not None else ""
        if first is sync and positions_only:  # the rows agree: their max |diff| would point at the wrong tensor
            said = f"runs part at {first.name}: {sync.detail}; the rows themselves agree (max |diff| {first.max_abs:.3g})"
        else:
            said = f"runs part at {first.name}{where}: max |diff| {first.max_abs:.3g}, cosine {first.cosine:.6f} (tolerance atol {tol.atol:g}, rtol {tol.rtol:g})"
        findings.insert(0, Finding(kind=FindingKind.FIRST_DIVERGENCE, severity=Severity.WARNING, stage=first.name, message=said))
    if first_apart is not None:
        s = steps[first_apart]
        findings.append(Finding(kind=FindingKind.GENERATION_DIVERGED, severity=Severity.ERROR, stage=step_stage(first_apart),
                                message=f"generated texts part at step {first_apart}: A chose {s.a_token!r}, B chose {s.b_token!r}"))
    return DiffResult(a_label, b_label, tol, stages, steps, first, first_apart, a.generated_text, b.generated_text, findings,
                      images=image_report(a, b), compared_from=start)


def _tail(rows, skip: int):
    """An item's encoder rows after its first `skip` (whose placeholders a run did not compute); None stays None."""
    return rows[skip:] if rows is not None and skip else rows


def _rows(trace, kind: T, first: int, start: int):
    """A trace's `kind` rows (`rows × dim`, row k at prompt position first + k) from position `start` on (None: none)."""
    rows = trace.tensor_or_none(kind)
    return rows[start - first:] if rows is not None else None


def _columns(trace, first: int, start: int):
    """The position ids the decoder received (`3 × rows`), from prompt position `start` on (None: none)."""
    ids = trace.tensor_or_none(T.SYNC_POSITION_IDS)
    return ids[..., start - first:] if ids is not None else None


def _cached_finding(a, b, firsts: tuple[int, int], whole: set[int]) -> Finding:
    """What a comparison of a run whose prefix an engine served from a cache compared, and what it could not."""
    start = max(firsts)
    said = "; ".join(f"{label}: {cached.words()}" for label, t in (("A", a), ("B", b)) if (cached := cached_prefix(t)) is not None)
    skipped = f"; media items {', '.join(str(i) for i in sorted(whole))} served whole from it were not compared at encode" if whole else ""
    return Finding(kind=FindingKind.PARTIAL_COMPARISON, severity=Severity.INFO, stage=StageName.SYNC,
                   message=f"compared at prompt positions {start}..{len(a.input_ids) - 1} only, the positions both runs computed ({said}){skipped}")


def image_report(a, b) -> list[dict]:
    """Each image of the request: its span, where each run's sync put its rows, and each run's attention peak."""
    from qdebug.trace.landing import landings

    from .attention import attention_grid, peak_of

    def landed(trace, index):
        if StageName.SYNC not in trace.stages:
            return None
        summary = trace.stages[StageName.SYNC].summary
        if summary.media is not None:  # mixed media (Omni): an image's rows are where its placeholders are when exact there
            span = next((m for m in summary.media if m.modality == "image" and m.index == index and m.runs), None)
            return span.runs[0][0] if span is not None and span.exact else None
        return next((x.visual_offset for x in landings(trace) if x.image == index), None)  # an image's or a video's

    def peak(trace, index):
        grid = attention_grid(trace, index) if index < len(trace.images) else None
        return peak_of(grid, index).to_json() if grid is not None else None

    return [
        {"index": img.index, "path": img.path, "span": list(img.span) if img.span else None, "grid": [img.rows, img.cols],
         "text_offset": img.span[0] if img.span else None, "a_visual_offset": landed(a, img.index), "b_visual_offset": landed(b, img.index),
         "a_attention_peak": peak(a, img.index), "b_attention_peak": peak(b, img.index)}
        for img in a.images
    ]
