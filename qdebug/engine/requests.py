"""One traced request inside the engine, and which rows of a flattened step belong to it.

vLLM flattens a step's requests into one token dimension: request i of `input_batch.req_ids` owns rows
`query_start_loc[i]:query_start_loc[i+1]`, and (without speculative decoding) logits row i. Every tensor
kept here is on the CPU and is never a view of vLLM's reused buffers: a copy, or a view of a tensor the tracer
made for the step's traced rows (vllm_tracer._owned_cpu_rows); the engine's device holds at most one layer's
rows of a traced request at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qdebug.trace.hooks import Recorder


if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class Feature:
    """One multimodal item of the request as the worker holds it: modality, encoder-cache key, vLLM's
    placeholder range (offset, length) and the processor's grid and pixel-values (audio: input-features) shape."""

    modality: str
    identifier: str
    offset: int
    length: int
    grid_thw: tuple[int, int, int] | None
    pixel_shape: list[int] | None
    frames: int | None = None  # audio: the feature frames the clip's mask keeps
    seconds_per_slice: float | None = None  # video (Qwen2.5-VL): the processor's second_per_grid_ts


@dataclass
class EngineRequest:
    """What is recorded of one traced request: prompt rows as they are computed (chunked prefill is joined),
    then one row per decode step; `rec` is qdebug's own Recorder, filled the way its hooks fill it."""

    req_id: str
    name: str  # the client's qdebug_id, else the server's request id
    prompt_ids: list[int]
    features: list[Feature]
    max_tokens: int | None
    rec: Recorder = field(default_factory=lambda: Recorder(keep_hidden=True))
    prompt_rows: int = 0  # prompt positions recorded so far
    embeds: list = field(default_factory=list)  # prefill chunks of the decoder's input rows
    positions: list = field(default_factory=list)  # prefill chunks of the position ids
    hidden: dict[int, list] = field(default_factory=dict)  # layer → prefill chunks of its output rows
    encode: dict[int, Tensor] = field(default_factory=dict)  # feature index → encoder rows
    batches: list[dict] = field(default_factory=list)  # per forward: requests and tokens in that step
    steps_with: list[tuple[str, ...]] = field(default_factory=list)  # each step's requests (one tuple a step, shared)
    encoder_calls: list[dict] = field(default_factory=list)  # the batch log's encoder calls that carried its items
    mrope_delta: int | None = None
    expected_positions: Tensor | None = None  # the model's own MRoPE ids for the prompt (3 × T, get_mrope_input_positions), or None
    deepstack: dict[int, dict] = field(default_factory=dict)  # layer → rows added after it (Qwen3-VL), see record_addition
    layouts: dict[int, dict] = field(default_factory=dict)  # layer → the layout its kernel's value rows arrived in (prefill)
    input_path: str = "ids"  # or "embeds": a prompt_embeds request (the client sent the decoder's input rows themselves)
    keep_hidden: bool = True  # every prompt row of every layer (else statistics over every row plus the last row)
    closed_at_shutdown: dict | None = None  # written when the worker shut down before it was told the request finished
    cached_prefix: int | None = None  # prompt positions the engine says it served from its prefix cache or a KV connector (None: not known)
    computed_from: int | None = None  # the first prompt position computed in this run (set at its first recorded step)
    cache_reads: list = field(default_factory=list)  # every cache read of the request (engine.cache_reads.CacheRead), at its end

    def record_addition(self, layer: int, offset: int, delta, before) -> None:
        """What the engine added to this request's prompt rows between `layer` and the next (`delta`, this chunk's
        rows from prompt position `offset`; `before`: the stream there before the addition): nonzero rows only."""
        import torch

        from qdebug.trace.hooks import to_cpu

        delta, before = to_cpu(delta, torch.float32), to_cpu(before, torch.float32)
        entry = self.deepstack.setdefault(layer, {"rows": [], "added": [], "before_sq": 0.0})
        rows = (delta.abs().amax(-1) > 0).nonzero().flatten()
        if rows.numel():
            entry["rows"] += [offset + int(r) for r in rows.tolist()]
            entry["added"].append(delta[rows])
            entry["before_sq"] += float(before[rows].pow(2).sum())

    @property
    def co_scheduled(self) -> set[str]:
        """The other requests that shared a step with this one (joined here, once, not in every step)."""
        return set().union(*self.steps_with) - {self.req_id}

    @property
    def prefill_done(self) -> bool:
        """Whether every prompt row has been recorded."""
        return self.prompt_rows >= len(self.prompt_ids)

    def finish_prefill(self) -> None:
        """Join the prefill chunks into the recorder's `embeds`, `position_ids` and per-layer `hidden` (or, keeping
        only the last row, `hidden_stats` over every row and `hidden_kept`), as qdebug's own hooks fill them."""
        import torch

        from qdebug.trace.stats import tensor_stats

        rec = self.rec
        if self.embeds and rec.embeds is None:
            rec.embeds = torch.cat(self.embeds)
            rec.position_ids = torch.cat(self.positions, dim=-1) if self.positions else None
            rows = {layer: torch.cat(chunks) for layer, chunks in self.hidden.items()}
            if self.keep_hidden:
                rec.hidden = rows
            else:
                rec.hidden_stats = {layer: tensor_stats(r) for layer, r in rows.items()}
                rec.hidden_kept = {layer: r[-1:].clone() for layer, r in rows.items()}
            self.embeds, self.positions, self.hidden = [], [], {}


@dataclass
class RowSlice:
    """The rows of one traced request in the step being run: [start, end) of the flattened batch; `prefill`
    when they are prompt rows; `logits_row` when this step samples its next token from that row."""

    request: EngineRequest
    start: int
    end: int
    prefill: bool
    logits_row: int | None
    offset: int = 0  # the prompt position of the first row (prefill)
    gathered: int = 0  # where its rows start among the step's traced rows taken at once (vllm_tracer._gather_plan)


def rows_of_step(req_ids: list[str], query_start_loc, traced: dict[str, EngineRequest], computed: dict[str, int]) -> list[RowSlice]:
    """The traced requests' rows in a step: request i of `req_ids` owns `query_start_loc[i]:[i+1]`.

    `computed`: each traced request's tokens computed before this step. A request's first step may start at N > 0:
    its positions 0..N-1 were served from the prefix cache (or a KV connector), and its rows are recorded from N on
    (`computed_from`; the engine's own count, `cached_prefix`, must say the same). A request whose later prefill rows
    do not continue where its recording stopped (a preemption) is left out: its rows would not be its prompt's.
    """
    slices = []
    for i, rid in enumerate(req_ids):
        req = traced.get(rid)
        if req is None:
            continue
        start, end = int(query_start_loc[i]), int(query_start_loc[i + 1])
        done = computed[rid]
        prompt = len(req.prompt_ids)
        if done < prompt:
            if req.computed_from is None:  # its first recorded step: what it starts with was served from a cache
                if req.cached_prefix is not None and done != req.cached_prefix:
                    raise RowGap(rid, f"its first recorded step starts at prompt position {done}, but the engine served "
                                      f"{req.cached_prefix} positions from its caches")
                req.computed_from = req.prompt_rows = done
            if done != req.prompt_rows:
                raise RowGap(rid, f"prefill resumes at {done} but {req.prompt_rows} prompt rows were recorded")
            samples = done + (end - start) >= prompt
            slices.append(RowSlice(req, start, end, True, i if samples else None, done))
        else:
            if end - start != 1:
                raise RowGap(rid, f"{end - start} rows in a decode step (speculative decoding is not traced)")
            slices.append(RowSlice(req, start, end, False, i))
    return slices


class RowGap(Exception):
    """A traced request's rows cannot be recorded whole (the request is then answered untraced)."""

    def __init__(self, req_id: str, why: str) -> None:
        super().__init__(f"request {req_id}: {why}")
        self.req_id = req_id
