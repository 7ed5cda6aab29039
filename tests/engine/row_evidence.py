"""Whose encoder rows sit at each request's placeholders, read straight from the engine's traces by the tests (the
tensors the engine recorded, compared row by row here): the evidence the product's verdicts and the watch's findings
are held against, computed without qdebug's analysis (engine_evidence, detectors.contamination)."""

from __future__ import annotations

import json
from pathlib import Path

from .vllm_server import DEMO

NOBODY = "?"  # a row no traced request's encoder produced
SHIFTED = "shifted"  # one of the request's own encoder rows, at another of its placeholders


def placeholder_ids(checkpoint: Path = DEMO) -> set[int]:
    """The image and video placeholder token ids of the checkpoint's config."""
    config = json.loads((checkpoint / "config.json").read_text())
    return {int(config[k]) for k in ("image_token_id", "video_token_id") if config.get(k) is not None}


def landed(trace, ids: set[int]):
    """The rows the decoder received at the prompt's placeholder tokens (the trace's `sync.embeds`)."""
    rows = [i for i, t in enumerate(trace.input_ids) if t in ids]
    return trace.tensors["sync.embeds"][rows].float()


def encoded(trace):
    """The request's encoder rows, item after item (the trace's `encode.N`)."""
    import torch

    items = sorted((int(k.split(".")[1]), v) for k, v in trace.tensors.items() if k.startswith("encode.") and k.split(".")[1].isdigit())
    return torch.cat([v.float().reshape(-1, v.shape[-1]) for _, v in items])


def row_owners(traces: dict, ids: set[int] | None = None) -> dict[str, dict[str, int]]:
    """request → {owner: rows} over its placeholder rows: its own id (its own row at its own place), another request's
    id (a row of that request's encoder output), SHIFTED, or NOBODY."""
    import torch

    ids = placeholder_ids() if ids is None else ids
    enc = {rid: encoded(t) for rid, t in traces.items()}

    def same(row, rows):
        return ((rows - row).abs() <= 1e-5 + 1e-4 * row.abs()).all(dim=-1)

    out: dict[str, dict[str, int]] = {}
    for rid, trace in traces.items():
        owners: dict[str, int] = {}
        mine = enc[rid]
        for i, row in enumerate(landed(trace, ids)):
            if i < mine.shape[0] and bool(same(row, mine[i:i + 1]).all()):
                owner = rid
            else:
                owner = next((other for other in sorted(enc) if other != rid and bool(same(row, enc[other]).any())), None)
                owner = owner or (SHIFTED if bool(same(row, mine).any()) else NOBODY)
            owners[owner] = owners.get(owner, 0) + 1
        out[rid] = owners
    return out


def foreign_rows(traces: dict, ids: set[int] | None = None) -> dict[str, list[set[str]]]:
    """request → for each of its placeholder rows that is not its own encoder row at its place, the other requests
    whose encoder output holds that row (any of its rows; empty: no one's). Where images share plain background, one
    row may be several requests' rows: each is a possible owner, none can be told apart from the row alone."""
    import torch

    ids = placeholder_ids() if ids is None else ids
    enc = {rid: encoded(t) for rid, t in traces.items()}

    def same(row, rows):
        return ((rows - row).abs() <= 1e-5 + 1e-4 * row.abs()).all(dim=-1)

    out: dict[str, list[set[str]]] = {}
    for rid, trace in traces.items():
        mine, rows = enc[rid], []
        for i, row in enumerate(landed(trace, ids)):
            if i < mine.shape[0] and bool(same(row, mine[i:i + 1]).all()):
                continue
            rows.append({other for other in enc if other != rid and bool(same(row, enc[other]).any())})
        out[rid] = rows
    return out


def not_own(owners: dict[str, int], rid: str) -> dict[str, int]:
    """The owners of the rows that are not the request's own at their own place."""
    return {o: n for o, n in owners.items() if o != rid}
