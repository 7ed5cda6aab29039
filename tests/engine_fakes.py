"""A vLLM model runner in miniature, for testing the plugin's engine-side code (the watch's checks, the flight recorder,
the batch log) without vLLM: real torch tensors, laid out and handed over the way vLLM 0.32's V1 runner does.

What the engine code reads, and where this fake keeps it (the names are vLLM's):
- the step: `execute_model(scheduler_output)` (a `SchedulerOutput`'s `num_scheduled_tokens`, `scheduled_new_reqs`,
  `scheduled_cached_reqs`, `scheduled_encoder_inputs`, `finished_req_ids`); inside it `input_batch.req_ids` and
  `query_start_loc.np` (whose rows of the flattened step are whose), `mrope_positions.gpu` (the step's (t, h, w) ids);
- the requests: `requests[rid]` (`CachedRequestState`: `prompt_token_ids`, `mm_features` with `identifier`,
  `modality`, `mm_position` and `data` (`*_grid_thw`), `num_computed_tokens`, `output_token_ids`, `sampling_params`);
- the encoder: `_execute_mm_encoder` calls `model.embed_multimodal(**inputs)` once per modality with the step's new
  items (flat patch rows and one grid row each) and keeps each item's rows in `encoder_cache[identifier]`;
- the model: `embed_input_ids(input_ids, multimodal_embeddings=[...], is_multimodal=mask)` (the merge), decoder
  layers at `model.model.layers` (each `self_attn.qkv_proj` returning `(rows, bias)` and `self_attn.attn(q, k, v)`
  with `num_heads`, `num_kv_heads`), `compute_logits(hidden)`, `get_mrope_input_positions(prompt, features)`; and
  the runner's `_init_mrope_positions(state)`, called once per new request.

So the plugin's own fault planters (engine/vllm_faults.install: head-first, shared-visual-buffer,
batch-dependent-encoder, temporal-ids-flat, ...) plant here as they do in vLLM, and the faults below that no preset
covers are planted the same way: by wrapping a model method. To test a new engine check, give the fake the attribute
vLLM holds it in (one attribute of `FakeRunner`), then drive steps with `FakeRunner.step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 64, 32, 4, 2, 8, 3
PATCH_DIM, MERGE = 12, 2  # an encoder patch row; the spatial merge (merge² patches make one encoder row)
IMAGE_TOKEN, VIDEO_TOKEN = 60, 61
TEXT = [5, 6, 7]  # the text before each item and after the last: every request's prompt is the same text
_INPUTS = {"image": ("pixel_values", "image_grid_thw"), "video": ("pixel_values_videos", "video_grid_thw")}


# what vLLM's worker holds per request -------------------------------------------------------------------------------
@dataclass
class PlaceholderRange:
    """vLLM's `PlaceholderRange`: where an item's placeholders sit in the prompt (every one takes a row here)."""

    offset: int
    length: int
    is_embed: Any = None


@dataclass
class Feature:
    """vLLM's `MultiModalFeatureSpec`: one item of a request (its encoder-cache key, placeholders and inputs)."""

    modality: str
    identifier: str
    mm_position: PlaceholderRange
    data: dict | None
    grid: tuple[int, int, int] = (1, 4, 4)

    @property
    def rows(self) -> int:
        """The encoder rows the item takes (t·h·w / merge²)."""
        t, h, w = self.grid
        return t * h * w // (MERGE * MERGE)

    def inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Its patch rows and its grid row, as the processor gave them."""
        pixels, grid = _INPUTS[self.modality]
        assert self.data is not None
        return self.data[pixels].data, self.data[grid].data


@dataclass
class RequestState:
    """vLLM's `CachedRequestState`: what the worker keeps of one request in flight."""

    req_id: str
    prompt_token_ids: list[int]
    mm_features: list[Feature]
    sampling_params: Any = None
    num_computed_tokens: int = 0
    output_token_ids: list[int] = field(default_factory=list)
    mrope_positions: Any = None
    mrope_position_delta: int | None = None


def media(modality: str, identifier: str, grid: tuple[int, int, int] = (1, 4, 4), seed: int | None = None) -> Feature:
    """One item's inputs (random patch rows from `seed`, by default from its identifier); its place is set by `request`."""
    t, h, w = grid
    gen = torch.Generator().manual_seed(seed if seed is not None else sum(map(ord, identifier)) * 7919)
    pixels = torch.randn(t * h * w, PATCH_DIM, generator=gen)
    keys = _INPUTS[modality]
    data = {keys[0]: SimpleNamespace(data=pixels), keys[1]: SimpleNamespace(data=torch.tensor([t, h, w]))}
    return Feature(modality, identifier, PlaceholderRange(0, 0), data, grid)


def image(identifier: str, grid: tuple[int, int, int] = (1, 4, 4), seed: int | None = None) -> Feature:
    """An image item (one temporal patch)."""
    return media("image", identifier, grid, seed)


def video(identifier: str, grid: tuple[int, int, int] = (2, 4, 4), seed: int | None = None) -> Feature:
    """A video item (`grid[0]` temporal patches)."""
    return media("video", identifier, grid, seed)


def request(rid: str, items: list[Feature], qdebug_id: str | None = None) -> RequestState:
    """A request's state: for each item the same text then its placeholder tokens, and the text again at the end."""
    prompt: list[int] = []
    for item in items:
        prompt += TEXT
        token = IMAGE_TOKEN if item.modality == "image" else VIDEO_TOKEN
        item.mm_position = PlaceholderRange(len(prompt), item.rows)
        prompt += [token] * item.rows
    prompt += TEXT
    # what the plugin's front end attaches to every request: qdebug's fingerprint of each item's content (its patch
    # rows here), which the cache witness judges an encoder-cache read by, never by the identifier
    from qdebug.engine.cache_reads import MEDIA_ARG, fingerprint

    media = {MEDIA_ARG: {"prints": [fingerprint(item.inputs()[0]) for item in items], "processor": [None] * len(items)}}
    params = SimpleNamespace(extra_args={**media, **({"qdebug_id": qdebug_id} if qdebug_id else {})})
    return RequestState(rid, prompt, items, params)


# the model ----------------------------------------------------------------------------------------------------------
class Attention(nn.Module):
    """vLLM's `Attention` in miniature: (query, key, value) as [tokens, heads × dim], each request attending to its own
    earlier rows (this step's and those kept from earlier steps) in the runner's step layout."""

    def __init__(self) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_size = HEADS, KV_HEADS, HEAD_DIM
        self.step: list[tuple[str, int, int]] = []  # (request, first row, end row) of the step being run
        self.kept: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # request → its keys and values so far

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(query)
        group = HEADS // KV_HEADS
        for rid, start, end in self.step:
            k_old, v_old = self.kept.get(rid, (key[:0], value[:0]))
            k, v = torch.cat([k_old, key[start:end]]), torch.cat([v_old, value[start:end]])
            self.kept[rid] = (k, v)
            q = query[start:end].reshape(end - start, HEADS, HEAD_DIM).transpose(0, 1)
            kh = k.reshape(-1, KV_HEADS, HEAD_DIM).transpose(0, 1).repeat_interleave(group, 0)
            vh = v.reshape(-1, KV_HEADS, HEAD_DIM).transpose(0, 1).repeat_interleave(group, 0)
            scores = q @ kh.transpose(1, 2) / HEAD_DIM ** 0.5
            done = k.shape[0] - (end - start)
            mask = torch.arange(k.shape[0])[None, :] > (done + torch.arange(end - start))[:, None]
            weights = scores.masked_fill(mask, float("-inf")).softmax(-1)
            out[start:end] = (weights @ vh).transpose(0, 1).reshape(end - start, -1)
        return out


class QKVLinear(nn.Linear):
    """vLLM's `QKVParallelLinear`: returns (rows, bias)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return super().forward(x), None


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv_proj = QKVLinear(HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM, bias=False)
        self.attn = Attention()
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        qkv, _ = self.qkv_proj(hidden)
        q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
        return self.o_proj(self.attn(q, k, v))


class DecoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self_attn = SelfAttention()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + self.self_attn(hidden)


class FakeModel(nn.Module):
    """The multimodal model: an encoder (merge² patch rows → one row), the merge, decoder layers, the logits."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.visual = nn.Linear(PATCH_DIM * MERGE * MERGE, HIDDEN)
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.model = nn.Module()
        self.model.layers = nn.ModuleList(DecoderLayer() for _ in range(LAYERS))
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def embed_multimodal(self, **inputs: torch.Tensor) -> list[torch.Tensor]:
        """One encoder call: each item's rows from its own patch rows alone (so an item encodes the same in any batch)."""
        for pixels_key, grid_key in _INPUTS.values():
            if pixels_key in inputs:
                pixels, grids = inputs[pixels_key], inputs[grid_key]
                break
        out, start = [], 0
        for t, h, w in grids.tolist():
            n = t * h * w
            patches = pixels[start:start + n].reshape(n // (MERGE * MERGE), -1)
            out.append(self.visual(patches))
            start += n
        return out

    def embed_input_ids(self, input_ids: torch.Tensor, multimodal_embeddings: list | None = None,
                        is_multimodal: torch.Tensor | None = None) -> torch.Tensor:
        """The token embeddings with the step's encoder rows put at its placeholder rows (vLLM's merge)."""
        embeds = self.embed_tokens(input_ids)
        if multimodal_embeddings is not None and len(multimodal_embeddings) and is_multimodal is not None:
            rows = torch.cat(list(multimodal_embeddings))
            if int(is_multimodal.sum()) != rows.shape[0]:
                raise ValueError(f"{int(is_multimodal.sum())} placeholder rows, {rows.shape[0]} encoder rows")
            embeds = embeds.clone()
            embeds[is_multimodal] = rows.to(embeds.dtype)
        return embeds

    def forward(self, embeds: torch.Tensor) -> torch.Tensor:
        hidden = embeds
        for layer in self.model.layers:
            hidden = layer(hidden)
        return hidden

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def get_mrope_input_positions(self, prompt: list[int], features: list) -> tuple[torch.Tensor, int]:
        """Qwen2-VL's rope index: text counts on along all three axes; an item's rows take (t, h, w) ids from where
        its placeholders start; the delta is what a generated token's position adds."""
        columns: list[torch.Tensor] = []
        at = 0  # the next prompt position
        nxt = 0  # the next id
        for f in sorted(features, key=lambda f: f.mm_position.offset):
            start = f.mm_position.offset
            if start > at:
                columns.append(torch.arange(nxt, nxt + start - at).expand(3, -1))
                nxt += start - at
            t, h, w = f.grid
            h, w = h // MERGE, w // MERGE
            ids = torch.stack([torch.arange(t).repeat_interleave(h * w), torch.arange(h).repeat_interleave(w).repeat(t),
                               torch.arange(w).repeat(t * h)]) + nxt
            columns.append(ids)
            nxt = int(ids.max()) + 1
            at = start + f.mm_position.length
        if len(prompt) > at:
            columns.append(torch.arange(nxt, nxt + len(prompt) - at).expand(3, -1))
            nxt += len(prompt) - at
        positions = torch.cat(columns, dim=-1) if columns else torch.zeros(3, 0, dtype=torch.int64)
        return positions, nxt - len(prompt)


# the runner ---------------------------------------------------------------------------------------------------------
class FakeRunner:
    """vLLM's `GPUModelRunner` in miniature (what the plugin reads of it); `step` runs one scheduler step."""

    def __init__(self, seed: int = 0, max_tokens: int = 512) -> None:
        self.model = FakeModel(seed)
        vision = SimpleNamespace(spatial_merge_size=MERGE)
        self.model_config = SimpleNamespace(hf_config=SimpleNamespace(vision_config=vision, image_token_id=IMAGE_TOKEN,
                                                                      video_token_id=VIDEO_TOKEN))
        self.requests: dict[str, RequestState] = {}
        self.waiting: dict[str, RequestState] = {}  # added, not yet scheduled
        self.encoder_cache: dict[str, torch.Tensor] = {}
        self.input_batch = SimpleNamespace(req_ids=[])
        self.query_start_loc = SimpleNamespace(np=torch.zeros(1, dtype=torch.int64).numpy())
        self.uses_mrope = True
        self.mrope_positions = SimpleNamespace(gpu=torch.zeros(3, max_tokens, dtype=torch.int64))
        self.logits: torch.Tensor | None = None  # the latest step's
        self.merged: torch.Tensor | None = None  # the latest step's decoder input

    def add(self, state: RequestState) -> RequestState:
        """A request the scheduler will schedule (its state is built in the step that first schedules it)."""
        self.waiting[state.req_id] = state
        return state

    def step(self, tokens: dict[str, int], finished: tuple[str, ...] = ()):
        """One scheduler step: `tokens` rows of each request, in that order (a request's whole prompt when None)."""
        scheduled = {}
        for rid, n in tokens.items():
            state = self.requests.get(rid) or self.waiting[rid]
            scheduled[rid] = n if n is not None else len(state.prompt_token_ids) - state.num_computed_tokens
        new = [self.waiting[rid] for rid in scheduled if rid in self.waiting]
        cached = [rid for rid in scheduled if rid not in self.waiting]
        encode: dict[str, list[int]] = {}
        for rid, n in scheduled.items():
            state = self.requests.get(rid) or self.waiting[rid]
            done = state.num_computed_tokens
            wanted = [i for i, f in enumerate(state.mm_features)
                      if f.mm_position.offset < done + n and f.mm_position.offset + f.mm_position.length > done
                      and f.identifier not in self.encoder_cache]
            if wanted:
                encode[rid] = wanted
        out = SimpleNamespace(
            num_scheduled_tokens=scheduled, total_num_scheduled_tokens=sum(scheduled.values()),
            scheduled_new_reqs=[SimpleNamespace(req_id=s.req_id, prompt_token_ids=s.prompt_token_ids, sampling_params=s.sampling_params,
                                                mm_features=s.mm_features, num_computed_tokens=s.num_computed_tokens, prompt_embeds=None)
                                for s in new],
            scheduled_cached_reqs=SimpleNamespace(req_ids=cached, num_computed_tokens=[self.requests[r].num_computed_tokens for r in cached]),
            scheduled_encoder_inputs=encode, finished_req_ids=set(finished))
        with torch.inference_mode():  # as vLLM runs its steps
            return self.execute_model(out)

    # vLLM's methods, in the order its execute_model calls them ------------------------------------------------------
    def execute_model(self, scheduler_output):
        self._update_states(scheduler_output)
        self._execute_mm_encoder(scheduler_output)
        mm_embeds, is_mm_embed = self._gather_mm_embeddings(scheduler_output)
        input_ids, steps = self._prepare_inputs(scheduler_output)
        embeds = self.model.embed_input_ids(input_ids, multimodal_embeddings=mm_embeds, is_multimodal=is_mm_embed)
        self.merged = embeds
        for layer in self.model.model.layers:
            layer.self_attn.attn.step = steps
        hidden = self.model(embeds)
        last = torch.tensor([end - 1 for _, _, end in steps])
        logits = self.model.compute_logits(hidden[last])
        self.logits = logits
        for (rid, start, end), row in zip(steps, logits):
            state = self.requests[rid]
            state.num_computed_tokens += end - start
            if state.num_computed_tokens >= len(state.prompt_token_ids) + len(state.output_token_ids):
                state.output_token_ids.append(int(row.argmax()))
        return logits

    def _update_states(self, scheduler_output) -> None:
        for rid in scheduler_output.finished_req_ids:
            self.requests.pop(rid, None)
            for layer in self.model.model.layers:
                layer.self_attn.attn.kept.pop(rid, None)
        for new in scheduler_output.scheduled_new_reqs:  # the state takes the request's items as the step hands them over
            state = self.waiting.pop(new.req_id)
            state.mm_features = new.mm_features
            self.requests[new.req_id] = state
            self._init_mrope_positions(state)
        self.input_batch.req_ids = list(scheduler_output.num_scheduled_tokens)
        counts = [0, *scheduler_output.num_scheduled_tokens.values()]
        self.query_start_loc.np = torch.tensor(counts).cumsum(0).numpy()

    def _init_mrope_positions(self, state: RequestState) -> None:
        state.mrope_positions, state.mrope_position_delta = self.model.get_mrope_input_positions(state.prompt_token_ids, state.mm_features)

    def _execute_mm_encoder(self, scheduler_output) -> None:
        """One encoder call per modality with the step's new items, in vLLM's order (by request, then grouped by modality)."""
        items = [(self.requests[rid].mm_features[i].modality, rid, i)
                 for rid, indexes in scheduler_output.scheduled_encoder_inputs.items() for i in indexes]
        items.sort(key=lambda item: item[0])
        for modality in dict.fromkeys(m for m, _, _ in items):
            group = [self.requests[rid].mm_features[i] for m, rid, i in items if m == modality]
            pixels_key, grid_key = _INPUTS[modality]
            inputs = [f.inputs() for f in group]
            outputs = self.model.embed_multimodal(**{pixels_key: torch.cat([p for p, _ in inputs]),
                                                     grid_key: torch.stack([g for _, g in inputs])})
            for f, rows in zip(group, outputs):
                self.encoder_cache[f.identifier] = rows

    def _gather_mm_embeddings(self, scheduler_output) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Each scheduled item's encoder rows for the placeholder rows this step computes, in request order."""
        mm_embeds, start = [], 0
        is_mm_embed = torch.zeros(scheduler_output.total_num_scheduled_tokens, dtype=torch.bool)
        for rid in self.input_batch.req_ids:
            n, state = scheduler_output.num_scheduled_tokens[rid], self.requests[rid]
            done = state.num_computed_tokens
            for f in state.mm_features:
                lo = max(done - f.mm_position.offset, 0)
                hi = min(done + n - f.mm_position.offset, f.mm_position.length)
                if lo >= hi:
                    continue
                mm_embeds.append(self.encoder_cache[f.identifier][lo:hi])
                first = start + f.mm_position.offset - done
                is_mm_embed[first + lo:first + hi] = True
            start += n
        return mm_embeds, is_mm_embed

    def _prepare_inputs(self, scheduler_output) -> tuple[torch.Tensor, list[tuple[str, int, int]]]:
        """The step's token ids and MRoPE ids, request after request; (request, first row, end row) of each."""
        ids: list[int] = []
        steps = []
        for rid in self.input_batch.req_ids:
            n, state = scheduler_output.num_scheduled_tokens[rid], self.requests[rid]
            done, prompt = state.num_computed_tokens, len(state.prompt_token_ids)
            tokens = (state.prompt_token_ids + state.output_token_ids)[done:done + n]
            start = len(ids)
            ids += tokens
            in_prompt = max(min(n, prompt - done), 0)
            self.mrope_positions.gpu[:, start:start + in_prompt] = state.mrope_positions[:, done:done + in_prompt]
            if n > in_prompt:  # generated tokens: their position plus the delta on every axis
                first = max(done, prompt) + int(state.mrope_position_delta or 0)
                self.mrope_positions.gpu[:, start + in_prompt:start + n] = torch.arange(first, first + n - in_prompt)
            steps.append((rid, start, start + n))
        return torch.tensor(ids), steps


# the plugin's other parts, as vllm_plugin.py attaches them ------------------------------------------------------------
class FakeTracer:
    """What the watch reads of the plugin's tracer (`runner._qdebug_tracer`): its batch recorder, told where each step
    begins and ends as EngineTracer's hooks on the runner's StepHooks tell it, and the recording state the flight
    recorder sets (`pending`, `traced`, `bounded`, `_hooks`, `writer.trace_dir.root`); the plugin's cache witness,
    stepped first as EngineTracer steps it."""

    def __init__(self, runner: FakeRunner, root: str, batches: Any = None, witness: Any = None) -> None:
        self.runner, self.batches, self.witness = runner, batches, witness
        self.writer = SimpleNamespace(trace_dir=SimpleNamespace(root=root))
        self.pending: set[str] = set()
        self.traced: dict[str, Any] = {}
        self.bounded: dict[str, int] = {}
        self.hooked = 0  # how many times the flight recorder asked for the layer hooks

    def install(self) -> None:
        from qdebug.engine.step_hooks import TRACER, hooks_of

        hooks_of(self.runner).subscribe(TRACER, self)
        self.runner._qdebug_tracer = self  # type: ignore[attr-defined]

    def before(self, scheduler_output) -> None:
        if self.witness is not None:
            self.witness.observe(scheduler_output)
        if self.batches is not None:
            self.batches.step_begins(scheduler_output)

    def after(self, scheduler_output, output) -> None:
        if self.batches is not None:
            self.batches.step_ends()

    def _hooks(self, wanted: bool) -> None:
        self.hooked += int(wanted)


def serve(runner: FakeRunner, folder, *, fault: str | None = None, sample: float = 0.0, raising: frozenset[str] = frozenset(),
          batch_log: bool = True, seed: int = 0):
    """Attach the plugin's parts to the fake as vllm_plugin's load_model does: the fault first (planted by the plugin's
    own planters), then the watch (its Watcher, writing into `folder`), then the tracer with its batch recorder
    (`folder/traces/batches.jsonl`) and the cache witness (`runner._qdebug_witness`, which the watch's cache check
    reads). The Watcher; its rng seeded, so which encoder item is re-encoded is fixed."""
    import os
    import random

    from qdebug.engine.cache_witness import CacheWitness
    from qdebug.engine.watch_engine import Watcher
    from qdebug.engine.watch_settings import WatchSettings

    if fault:
        from qdebug.engine import vllm_faults

        vllm_faults.install(runner, fault)
    watcher = Watcher(runner, WatchSettings(sample=sample, folder=str(folder), log_bytes=1 << 20, raising=raising, run="fake"))
    watcher.rng = random.Random(seed)
    watcher.install()
    root = os.path.join(str(folder), "traces")
    os.makedirs(root, exist_ok=True)
    witness = runner._qdebug_witness = CacheWitness()  # type: ignore[attr-defined]
    recorder = None
    if batch_log:
        from qdebug.engine.batch_record import BatchLogFile, BatchRecorder

        recorder = BatchRecorder(runner, BatchLogFile(root), witness)
        recorder.install()
    FakeTracer(runner, root, recorder, witness).install()
    runner._qdebug_watch = watcher  # type: ignore[attr-defined]
    return watcher


# faults no preset of the plugin's plants (planted as the presets are: a model method wrapped) ------------------------
def misplace(runner: FakeRunner, victim: str, donor: str) -> None:
    """The merge puts `donor`'s encoder rows at `victim`'s placeholders (the first `victim`'s item of a step with
    both; a buffer shared between requests, as seed 000's)."""
    merge = runner.model.embed_input_ids

    def embed_input_ids(input_ids, multimodal_embeddings=None, **kwargs):
        if multimodal_embeddings is not None:
            owners = _step_items(runner)
            if victim in owners and donor in owners:
                items = list(multimodal_embeddings)
                v, d = owners.index(victim), owners.index(donor)
                if items[v].shape == items[d].shape:
                    items[v] = items[d].clone()
                multimodal_embeddings = items
        return merge(input_ids, multimodal_embeddings, **kwargs)

    runner.model.embed_input_ids = embed_input_ids  # type: ignore[method-assign]


def _step_items(runner: FakeRunner) -> list[str]:
    """The owner of each item the step's merge receives, in order (as `_gather_mm_embeddings` lists them)."""
    owners = []
    qsl = runner.query_start_loc.np
    for i, rid in enumerate(runner.input_batch.req_ids):
        state = runner.requests[rid]
        done, n = state.num_computed_tokens, int(qsl[i + 1] - qsl[i])
        owners += [rid for f in state.mm_features
                   if f.mm_position.offset < done + n and f.mm_position.offset + f.mm_position.length > done]
    return owners


def copy_logits(runner: FakeRunner, into: int, source: int) -> None:
    """Row `into` of each step's logits is row `source`'s (a sampler reading another request's row)."""
    logits = runner.model.compute_logits

    def compute_logits(hidden, *args, **kwargs):
        out = logits(hidden, *args, **kwargs)
        if out.shape[0] > max(into, source):
            out = out.clone()
            out[into] = out[source]
        return out

    runner.model.compute_logits = compute_logits  # type: ignore[method-assign]


def nan_logits(runner: FakeRunner, row: int) -> None:
    """Row `row` of each step's logits holds a NaN (an overflow in the final layers)."""
    logits = runner.model.compute_logits

    def compute_logits(hidden, *args, **kwargs):
        out = logits(hidden, *args, **kwargs)
        if out.shape[0] > row:
            out = out.clone()
            out[row, 3] = float("nan")
        return out

    runner.model.compute_logits = compute_logits  # type: ignore[method-assign]


def drop_placeholder(state: RequestState, item: int = 0) -> None:
    """The prompt's first placeholder token of `item` replaced by text (the processor counted one row fewer than the
    encoder gives: the placeholder range and the prompt's tokens disagree)."""
    state.prompt_token_ids[state.mm_features[item].mm_position.offset] = TEXT[0]
