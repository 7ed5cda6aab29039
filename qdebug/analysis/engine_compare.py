"""Where two runs of one request part, stage by stage (`encode` per item, `sync`, `layer.N`, `logits`, `step.K`), within
the stated tolerances (analysis.tolerances via analysis.diff): the reference against the engine alone, the engine alone
against the engine in a burst; and, where a burst's encoder rows part from the isolated ones, whose rows they are."""

from __future__ import annotations

from dataclasses import dataclass, field

from qdebug.errors import IncompatibleTracesError
from qdebug.trace.items import trace_items
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import FindingKind, StageName, StageVerdict, is_step_stage, step_stage

from .detectors.contamination import UNMATCHED

SHIFTED = "shifted"  # attribution of a parted encoder row: a copy of another of its own rows (UNMATCHED: no one's)


@dataclass
class Parting:
    """Where run B of a request parts from run A (stage None: they agree at every stage both hold)."""

    stage: str | None
    said: str = ""  # the first divergence in words (max |diff|, cosine, tolerance), or why the traces cannot be compared
    order: list[str] = field(default_factory=list)  # the stages compared, in pipeline order
    findings: list = field(default_factory=list)  # the comparison's own findings (layout of the engine's kernel, ...)
    rows: list[str] = field(default_factory=list)  # at encode: whose rows each item's parted rows are (attribute_encoder_rows)

    def at_or_after(self, stage: str) -> bool:
        """Whether this parting is at `stage` or later in the pipeline (False when it parts nowhere)."""
        if self.stage is None:
            return False
        order = self.order or [self.stage]
        return stage not in order or self.stage not in order or order.index(self.stage) >= order.index(stage)


def parting(a, b, atol: float | None = None, rtol: float | None = None) -> Parting:
    """The first stage at which trace `b` parts from trace `a` beyond tolerance (or the first generated token apart)."""
    from .diff import diff_traces

    held_a, held_b = media_items(a), media_items(b)
    if a.input_ids == b.input_ids and a.mixed_media != b.mixed_media and len(held_a if a.mixed_media else held_b) > 1:
        # One prompt of several modalities, held per encoder by one trace only (Qwen2.5-Omni's mixed media in an engine
        # trace written before engine/engine_media.py: one modality's stages): the tensors cannot be lined up, so the runs
        # are judged by their answers, and it is said. One modality's items line up item by item (diff_traces).
        return Parting(None, "not held by both: the mixed-media items' stages (one trace holds them per encoder, the other "
                             f"not) for one prompt of {len(a.input_ids)} tokens; compared by their answers only")
    if held_a != held_b:  # an item that never reached one run (a video sent as text): counted before any tensor
        return Parting(StageName.PREPROCESS, f"the runs hold other media items: {_count_words(held_a)} vs {_count_words(held_b)} "
                                             "(placeholder runs found in each trace's prompt)")
    try:
        result = diff_traces(a, b, atol=atol, rtol=rtol)
    except IncompatibleTracesError as exc:  # other prompt tokens or grids: they part before any tensor
        return Parting(StageName.PREPROCESS, exc.message if hasattr(exc, "message") else str(exc))
    order = [s.name for s in result.stages]
    first = result.first_divergence
    kept = [f for f in result.findings if f.kind in (FindingKind.LAYOUT, FindingKind.POSITION_IDS)]
    if first is not None:
        said = next((f.message for f in result.findings if f.kind == FindingKind.FIRST_DIVERGENCE), first.detail)
        if first.name == StageName.SYNC and first.detail.startswith("position ids"):  # the ids part, not the rows: say the ids
            said = f"runs part at sync: {first.detail}"
        return Parting(first.name, said, order, kept)
    if result.first_step_apart is not None:
        k = result.first_step_apart
        s = result.steps[k]
        return Parting(step_stage(k), f"generated tokens part at step {k}: {s.a_token!r} vs {s.b_token!r}", order, kept)
    missing = [s.name for s in result.stages if s.verdict == StageVerdict.MISSING and not is_step_stage(s.name)]
    return Parting(None, f"not held by both: {', '.join(missing)}" if missing else "", order, kept)


def media_items(trace) -> dict[str, int]:
    """How many media items of each modality a trace holds stages for (a video: one item, its placeholder runs)."""
    out: dict[str, int] = {}
    for item in trace_items(trace):
        out[item.modality] = out.get(item.modality, 0) + 1
    return out


def _count_words(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(counts.items())) or "no media item"


def attribute_encoder_rows(alone, burst, neighbours: dict, tol) -> list[str]:
    """For each item whose encoder rows in `burst` part from `alone`'s: how many parted rows are a neighbour's rows
    (`neighbours`: request id → its trace in the same burst), a shifted copy of its own, or no one's; one line per item."""
    lines = []
    for item in trace_items(burst):
        mine, before = burst.tensor_or_none(T.ENCODE, item=item.item), alone.tensor_or_none(T.ENCODE, item=item.item)
        if mine is None or before is None or mine.shape != before.shape:
            continue
        parted = [r for r in range(mine.shape[0]) if not _same_row(tol, before[r], mine[r:r + 1])[0]]
        if not parted:
            continue
        owners: dict[str, int] = {}
        for r in parted:
            owner = _owner(mine[r], r, before, neighbours, tol)
            owners[owner] = owners.get(owner, 0) + 1
        said = ", ".join(f"{n} {_owner_words(o)}" for o, n in sorted(owners.items(), key=lambda kv: -kv[1]))
        lines.append(f"item {item.item}: {len(parted)} of {mine.shape[0]} rows differ ({said})")
    return lines


def _owner(row, index: int, own, neighbours: dict, tol) -> str:
    """Whose rows one parted encoder row equals: a neighbour in the burst (alone or in the burst), its own shifted, or no one."""
    for rid, trace in sorted(neighbours.items()):
        for item in trace_items(trace):
            rows = trace.tensor_or_none(T.ENCODE, item=item.item)
            if rows is not None and rows.shape[-1] == row.shape[-1] and _same_row(tol, row, rows)[0]:
                return rid
    same, where = _same_row(tol, row, own)
    if same and where != index:
        return SHIFTED
    return UNMATCHED


def _owner_words(owner: str) -> str:
    """How an owner reads in an attribution line."""
    return {SHIFTED: "a shifted copy of its own rows", UNMATCHED: "match no row seen"}.get(owner, f"are {owner}'s rows")


def _same_row(tol, row, rows) -> tuple[bool, int | None]:
    """Whether `row` (dim) equals one of `rows` (n × dim) within `tol`, and the first such row's index."""
    import torch

    x = rows.float()
    y = row.float().reshape(1, -1).expand_as(x)
    ok = (tol.excess(x, y) <= 0).all(dim=-1)
    hit = ok.nonzero()
    return (True, int(hit[0])) if hit.numel() else (False, None)


def engine_tolerance(a, b, atol: float | None = None, rtol: float | None = None):
    """The tolerance two traces are compared at (the engine's, by the less precise dtype)."""
    from .tolerances import tolerance_for

    return tolerance_for(a.meta.model["dtype"], b.meta.model["dtype"], atol, rtol, engine=bool(a.meta.engine or b.meta.engine))
