"""EngineTracer: hooks on a vLLM model runner that record the tagged requests' stages from inside the worker.

Where it listens (vLLM 0.32's V1 runner; see shared/DESIGN.md "Seams in vLLM"):
- each step (`runner.execute_model`, through the runner's StepHooks, engine/step_hooks.py): finished requests are
  written before vLLM drops their state, and the new requests the client tagged are noted
  (`scheduled_new_reqs[i].sampling_params.extra_args`);
- decoder layer 0's forward pre-hook: which rows of the flattened step are whose (`input_batch.req_ids`,
  `query_start_loc`), the decoder's input rows (`sync`) and vLLM's own (MRoPE) positions; the vision tower's
  rows per image from the encoder cache (`encode`);
- every decoder layer's forward hook: its output is `(hidden_states, residual)`; the residual stream, which
  transformers' decoder layer returns, is their sum (`layer.N`);
- `model.compute_logits` (wrapped): the raw logits each traced request samples from (`logits`, `step.K`).

With no traced request in flight the decoder hooks are not even attached. Any error while recording is logged
and drops that request's trace; the request itself is answered as without the plugin.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from qdebug.shown import shown
from qdebug.trace.hooks import to_cpu

from .plugin_clock import clock_of
from .vllm_model import decoder_layers, decoder_norm, linear_parts
from .step_hooks import TRACER, hooks_of
from .request_names import client_name, wants_trace
from .requests import EngineRequest, Feature, RowGap, rows_of_step

log = logging.getLogger("vllm.qdebug")


class EngineTracer:
    """Records tagged requests on one model runner and hands finished ones to `writer` (a background thread)."""

    def __init__(self, runner, writer, *, trace_all: bool, keep_hidden: bool = True, deepstack: bool = False, batches=None,
                 witness=None) -> None:
        self.runner = runner
        self.witness = witness  # a CacheWitness (every request's cache reads), or None
        self.clock = clock_of(runner)  # the hooks run inside vLLM's step: their time is the plugin's
        self.batches = batches  # a BatchRecorder (every request's steps and encoder calls), or None
        self.deepstack = deepstack  # Qwen3-VL: also measure what the engine adds between layers
        self.leaving: dict[int, object] = {}  # slice index → the stream leaving the last layer (deepstack only)
        self.projected: dict[int, Any] = {}  # layer → its q/k/v projection's output in this step (layout check)
        self.writer = writer
        self.trace_all = trace_all
        self.keep_hidden = keep_hidden
        self.traced: dict[str, EngineRequest] = {}
        self.pending: set[str] = set()  # tagged requests vLLM has scheduled but whose state is not built yet
        self.bounded: dict[str, int] = {}  # request → the bytes its folder may hold with its trace (the watch's recordings)
        self.slices: list = []  # the traced rows of the step being run
        self.gather: tuple = (None, None)  # how to take the step's traced prefill rows, and decode rows, each at once

    # installation -------------------------------------------------------------------------------------
    def install(self) -> None:
        """Subscribe to the runner's steps and wrap compute_logits; the layer hooks are attached only while a traced request
        is in flight, so with none tagged the model runs exactly as without the plugin (vLLM never unloads a model)."""
        runner, model = self.runner, self.runner.model
        self.layers = decoder_layers(model)
        self.num_layers = len(self.layers)
        self.handles: list = []
        logits = model.compute_logits
        model.compute_logits = lambda hidden, *a, **kw: self._logits(logits(hidden, *a, **kw))
        hooks_of(runner).subscribe(TRACER, self)

    def _hooks(self, wanted: bool) -> None:
        """Attach (or remove) the decoder hooks."""
        if wanted and not self.handles:
            self.handles.append(self.layers[0].register_forward_pre_hook(self._decoder_input, with_kwargs=True))
            self.handles += [layer.register_forward_hook(self._layer_output(i)) for i, layer in enumerate(self.layers)]
            self.handles += self._layout_hooks()
            if self.deepstack:  # what enters layer i+1 (the final norm after the last) minus what left layer i
                nexts = [*self.layers[1:], decoder_norm(self.runner.model)]
                self.handles += [module.register_forward_pre_hook(self._next_input(i), with_kwargs=True)
                                 for i, module in enumerate(nexts) if module is not None]
        elif not wanted and self.handles:
            for handle in self.handles:
                handle.remove()
            self.handles = []

    def _layout_hooks(self) -> list:
        """Hooks that read the layout of the rows each layer's kernel receives (seed 001), against the projection's own."""
        handles = []
        for i, layer in enumerate(self.layers):
            attn = getattr(layer, "self_attn", None)
            if attn is not None and getattr(attn, "attn", None) is not None and getattr(attn, "qkv_proj", None) is not None:
                handles.append(attn.qkv_proj.register_forward_hook(self._projected(i)))
                handles.append(attn.attn.register_forward_pre_hook(self._kernel_input(i, int(attn.attn.num_kv_heads)), with_kwargs=True))
            gdn = getattr(layer, "linear_attn", None)
            if gdn is not None and getattr(gdn, "in_proj_qkvz", None) is not None and not getattr(gdn, "gqa_interleaved_layout", False):
                handles.append(gdn.in_proj_qkvz.register_forward_hook(self._linear_input(i, gdn)))
        return handles

    def _prefilling(self) -> list:
        return [s for s in self.slices if s.prefill]

    def _projected(self, layer: int):
        def hook(module, args, output):
            if self._prefilling():
                rows = output[0] if isinstance(output, tuple) else output
                self.projected[layer] = rows
            return None

        return hook

    def _kernel_input(self, layer: int, kv_heads: int):
        def hook(module, args, kwargs):
            projected = self.projected.pop(layer, None)
            if projected is not None and self._prefilling():
                value = kwargs.get("value", args[2] if len(args) > 2 else None)
                with self.clock:
                    self._guard(self._record_layout, layer, "value", value, projected[:, -value.shape[-1]:], kv_heads)
            return None

        return hook

    def _linear_input(self, layer: int, gdn):
        def hook(module, args, output):
            if self._prefilling():
                with self.clock:
                    self._guard(self._record_linear_layout, layer, gdn, module, args[0], output[0] if isinstance(output, tuple) else output)
            return None

        return hook

    def _record_linear_layout(self, layer: int, gdn, proj, hidden, given) -> None:
        """The value rows the gated-delta-rule core receives against the input projection recomputed from its input."""

        parts = linear_parts(gdn)
        start = parts[0][0] + parts[1][0]
        width, heads = parts[2]
        clean = proj.forward(hidden)  # `forward`, not the call: the projection again without any hook (a fault's included)
        reference = (clean[0] if isinstance(clean, tuple) else clean)[:, start:start + width]
        self._record_layout(layer, "value", given[:, start:start + width], reference, heads)

    def _record_layout(self, layer: int, name: str, given, reference, heads: int) -> None:
        """Which layout the kernel's `name` rows are in for this step (CPU copies; the traced prefill requests keep it)."""
        from .layouts import read_layout

        layout = read_layout(to_cpu(given), to_cpu(reference), heads)
        for s in self._prefilling():
            kept = s.request.layouts.get(layer)
            if kept is None or kept["layout"] == "token-major":  # any chunk read otherwise is what the request keeps
                s.request.layouts[layer] = {"tensor": name, "layout": layout, "heads": heads, "rows": int(given.shape[0])}

    # the step ------------------------------------------------------------------------------------------
    def before(self, scheduler_output) -> None:
        """Before vLLM's step (the runner's StepHooks, first of the plugin's parts): finished requests written, new
        tagged ones noted, the layer hooks attached while any is in flight."""
        if self.witness is not None:  # first: the finished requests' reads stay readable for this step (outside vLLM's
            self._guard(self.witness.observe, scheduler_output)  # step: the clock's outer timer counts it as the plugin's)
        finished = getattr(scheduler_output, "finished_req_ids", ()) or ()
        if finished and self.batches is not None:  # the batch log's held lines on disk before the finished ones' traces
            self.batches.write()
        if self.traced or self.pending:  # with none in flight, a finished request is nothing of the tracer's
            self._guard(self._finish, finished)
        if self.batches is not None:  # after _finish: a finished request's encoder calls are still known there
            self.batches.step_begins(scheduler_output)
        self._guard(self._note_new, getattr(scheduler_output, "scheduled_new_reqs", ()) or ())
        self._hooks(bool(self.traced or self.pending))
        self.slices, self.leaving, self.projected = [], {}, {}

    def after(self, scheduler_output, output) -> None:
        """After vLLM's step (raised or not): the step's rows forgotten, its batch-log lines written."""
        self.slices, self.leaving, self.projected = [], {}, {}
        if self.batches is not None:
            self.batches.step_ends()

    def _guard(self, fn, *args):
        """Run a recording step; an error is logged, drops the traces involved, and never reaches vLLM."""
        try:
            return fn(*args)
        except Exception as exc:  # the plugin never fails a request
            dropped = sorted({s.request.req_id for s in self.slices} or self.traced)
            log.warning("qdebug: recording failed (%s: %s); requests %s are answered untraced",
                        type(exc).__name__, exc, ", ".join(dropped) or "none")
            for rid in dropped:
                self._drop(rid)
            self.slices, self.leaving, self.projected = [], {}, {}
            return None

    def _drop(self, rid: str) -> None:
        self.traced.pop(rid, None)
        self.pending.discard(rid)
        self.bounded.pop(rid, None)

    def _note_new(self, new_requests) -> None:
        """The newly scheduled requests the client tagged (or all, when the user said so)."""
        for new in new_requests:
            if wants_trace(getattr(getattr(new, "sampling_params", None), "extra_args", None), self.trace_all):
                self.pending.add(new.req_id)

    def _admit(self, rid: str) -> None:
        """Start recording a tagged request, now that vLLM holds its state (prompt ids, multimodal features)."""
        self.pending.discard(rid)
        state = self.runner.requests.get(rid)
        if state is None:
            return
        params = state.sampling_params
        extra = getattr(params, "extra_args", None) or {}
        ids, path = state.prompt_token_ids, "ids"
        if ids is None:  # a prompt_embeds request: the client may say which ids the rows stand for (seed 004's check)
            embeds = getattr(state, "prompt_embeds", None)
            if embeds is None:
                return
            ids, path = prompt_ids_for_embeds(extra.get("qdebug_prompt_ids"), int(embeds.shape[0])), "embeds"
        features = [_feature(f) for f in state.mm_features or []]
        name, refused = client_name(extra, rid)
        if refused:
            log.warning("qdebug: request %s: %s; traced under the server's id", rid, refused)
        self.traced[rid] = EngineRequest(rid, name, list(ids), features, getattr(params, "max_tokens", None),
                                         keep_hidden=self.keep_hidden, input_path=path,
                                         expected_positions=self._model_positions(state) if path == "ids" else None,
                                         cached_prefix=self._cached_prefix(rid))

    def _cached_prefix(self, rid: str) -> int | None:
        """The prompt positions the engine served request `rid` from its prefix cache or a KV connector at its first step,
        as the cache witness took them from the scheduler (None when the witness holds no record of it)."""
        if self.witness is None or rid not in self.witness.live:
            return None
        return self.witness.cached_prefix(rid)

    def _model_positions(self, state):
        """The model's own MRoPE ids for a request's prompt (`get_mrope_input_positions`, as vLLM's runner asks it), to hold
        the ids the decoder receives against (the sync stage's check); None for a model without MRoPE."""
        model = self.runner.model
        if not getattr(self.runner, "uses_mrope", False) or not hasattr(model, "get_mrope_input_positions"):
            return None
        feats = [f for f in state.mm_features or [] if f.modality != "prompt_embeds"]
        try:
            positions, _ = model.get_mrope_input_positions(list(state.prompt_token_ids), feats)
        except Exception as exc:  # the trace goes on without the check (said), the request as without the plugin
            log.warning("qdebug: request %s: the model's MRoPE ids not recomputed (%s: %s)", state.req_id, type(exc).__name__, exc)
            return None
        return to_cpu(positions, _int64())

    def _decoder_input(self, module, args, kwargs):
        with self.clock:
            self._guard(self._record_input, args, kwargs)
        return None

    def _record_input(self, args, kwargs) -> None:
        runner = self.runner
        req_ids = list(runner.input_batch.req_ids)
        for rid in req_ids:
            if rid in self.pending:
                self._admit(rid)
        if not any(rid in self.traced for rid in req_ids):
            return
        computed = {rid: runner.requests[rid].num_computed_tokens for rid in req_ids if rid in self.traced}
        qsl = runner.query_start_loc.np[: len(req_ids) + 1]
        while True:
            try:
                self.slices = rows_of_step(req_ids, qsl, self.traced, computed)
                break
            except RowGap as gap:
                log.warning("qdebug: %s; that request is answered untraced", gap)
                self._drop(gap.req_id)
        self.gather = _gather_plan(self.slices)
        positions = kwargs.get("positions", args[0] if args else None)
        hidden = kwargs.get("hidden_states", args[1] if len(args) > 1 else None)
        batch = {"requests": len(req_ids), "tokens": int(qsl[-1])}
        step = tuple(req_ids)
        for s in self.slices:
            req = s.request
            req.batches.append(batch)
            req.steps_with.append(step)
            req.rec.decoder_calls += 1
            if not s.prefill:
                continue
            req.embeds.append(to_cpu(hidden[s.start:s.end]))
            pos = positions[..., s.start:s.end] if positions.ndim == 2 else positions[s.start:s.end][None].expand(3, -1)  # 1-D: as transformers hands its decoder (3 equal rows)
            req.positions.append(to_cpu(pos, dtype=_int64()))
            self._record_encoder_rows(req)
            req.mrope_delta = getattr(runner.requests[req.req_id], "mrope_position_delta", None)

    def _record_encoder_rows(self, req: EngineRequest) -> None:
        """Each image's rows from vLLM's encoder cache, while the step that merges them still holds them; not an item
        whose placeholders the prefix cache served whole (this run neither encodes nor merges it: whatever the encoder
        cache holds under its identifier is not what this run used)."""
        cache = getattr(self.runner, "encoder_cache", {}) or {}
        first = req.computed_from or 0
        for index, feature in enumerate(req.features):
            if index not in req.encode and feature.offset + feature.length > first and feature.identifier in cache:
                req.encode[index] = to_cpu(cache[feature.identifier])

    def _layer_output(self, layer: int):
        def hook(module, args, output):
            if self.slices:
                with self.clock:
                    self._guard(self._record_layer, layer, output)
            return None

        return hook

    def _record_layer(self, layer: int, output) -> None:
        hidden, residual = output if isinstance(output, tuple) else (output, None)
        # every traced row of the step in two tensors of their own (prompt rows, decode rows): a few ops per layer, not
        # a few per request; what each request keeps is a view of them
        prompt, decode = (_owned_cpu_rows(plan, hidden, residual) for plan in self.gather)
        for i, s in enumerate(self.slices):
            if s.prefill:
                rows = prompt[s.gathered:s.gathered + s.end - s.start]  # joined (copied) when its prefill is done
                if self.deepstack:
                    self.leaving[i] = rows
                s.request.hidden.setdefault(layer, []).append(rows)
            else:
                kept = s.request.rec.step_hidden.setdefault(layer, [])
                kept.append(decode[s.gathered])
                if len(kept) % COMPACT_STEPS == 0:  # copied out of the shared step tensors: a long request never holds
                    kept[-COMPACT_STEPS:] = torch_stack(kept[-COMPACT_STEPS:]).unbind(0)  # other requests' rows long
        if layer == self.num_layers - 1:
            for s in self.slices:
                if s.prefill:
                    s.request.prompt_rows += s.end - s.start

    def _next_input(self, layer: int):
        def hook(module, args, kwargs):
            if self.slices and self.leaving:
                with self.clock:
                    self._guard(self._record_addition, layer, args, kwargs)
            return None

        return hook

    def _record_addition(self, layer: int, args, kwargs) -> None:
        """Deepstack evidence: the stream entering the next module minus the stream that left `layer`."""
        if len(args) >= 3 or "residual" in kwargs:  # a decoder layer: (positions, hidden_states, residual)
            hidden = kwargs.get("hidden_states", args[1] if len(args) > 1 else None)
            residual = kwargs.get("residual", args[2] if len(args) > 2 else None)
        else:  # the final norm: (hidden_states, residual)
            hidden, residual = args[0], (args[1] if len(args) > 1 else kwargs.get("residual"))
        for i, s in enumerate(self.slices):
            before = self.leaving.pop(i, None)
            if before is None:
                continue
            after = hidden[s.start:s.end] + (residual[s.start:s.end] if residual is not None else 0)
            s.request.record_addition(layer, s.offset, after - before, before)

    def _logits(self, logits):
        if self.slices:
            with self.clock:
                self._guard(self._record_logits, logits)
        return logits

    def _record_logits(self, logits) -> None:
        import torch

        sampling = [s for s in self.slices if s.logits_row is not None and s.logits_row < logits.shape[0]]
        if not sampling:
            return
        index = torch.tensor([s.logits_row for s in sampling], device=logits.device)
        rows = to_cpu(logits.index_select(0, index), torch.float32)  # one copy off the device for the step's traced rows
        for k, s in enumerate(sampling):
            if s.prefill:
                s.request.finish_prefill()
            s.request.rec.step_logits.append(rows[k].clone())  # a row of its own: a vocabulary-wide row is large

    # the end -------------------------------------------------------------------------------------------
    def _finish(self, finished: Iterable[str], at_shutdown: bool = False) -> None:
        for rid in list(finished):
            self.pending.discard(rid)
            limit = self.bounded.pop(rid, None)
            req = self.traced.pop(rid, None)
            if req is None:
                continue
            state = self.runner.requests.get(rid)
            generated = [int(t) for t in (state.output_token_ids if state is not None else []) if int(t) >= 0]
            if at_shutdown:
                req.closed_at_shutdown = shutdown_ending(generated, req.max_tokens, getattr(state, "sampling_params", None))
                log.warning("qdebug: request %s written at shutdown (%s)", rid, req.closed_at_shutdown["ended"])
            req.finish_prefill()
            if self.batches is not None:
                req.encoder_calls = self.batches.calls_for(rid)
            if self.witness is not None:  # every cache read of it (the engine core's, the encoder cache's): the trace says them
                req.cache_reads = self.witness.reads(rid)
            self.writer.submit(req, generated, limit)

    def close(self) -> None:
        """At shutdown: write every request still held. The worker learns that a request finished only from the next
        step's finished ids, so the last one an offline `LLM` served, or one shutdown cut short, would be lost."""
        if self.batches is not None:  # the batch log's held lines first (the last steps, the last requests' reads)
            self.batches.write()
        self._guard(self._finish, list(self.traced), True)  # after the last step: not the steps' plugin time


def shutdown_ending(generated: list[int], max_tokens: int | None, params: object) -> dict:
    """How a request written at shutdown had ended, from its tokens: at max_tokens, at a stop token, or not known
    (shutdown cut it short, or a stop string ended it: the worker never sees those)."""
    stops = getattr(params, "all_stop_token_ids", None) or set()
    if max_tokens is not None and len(generated) >= max_tokens:
        ended = "max_tokens"
    elif generated and generated[-1] in stops:
        ended = "stop token"
    else:
        ended = "unknown: cut short by the shutdown, or a stop string"
    return {"ended": ended, "tokens": len(generated)}


COMPACT_STEPS = 8  # a decode row stays a view of its step's shared tensor (other requests' rows) this many steps at most


def torch_stack(rows: list):
    """torch.stack (imported when a request has decoded that long)."""
    import torch

    return torch.stack(rows)


def _gather_plan(slices: list) -> tuple:
    """How a layer's traced rows are taken at once: the prefill slices' rows, and the decode slices' one row each,
    in slice order; each (start, end) when its rows are one run of the step (tracing every request), else an index
    tensor, or None when there are none. Sets each slice's `gathered` offset among its kind's rows."""
    plans: list[tuple[int, int] | Any] = []
    for prefill in (True, False):
        rows: list[int] = []
        for s in slices:
            if s.prefill == prefill:
                s.gathered = len(rows)
                rows.extend(range(s.start, s.end) if prefill else (s.start,))
        if not rows:
            plans.append(None)
        elif rows == list(range(rows[0], rows[0] + len(rows))):
            plans.append((rows[0], rows[0] + len(rows)))
        else:
            import torch

            plans.append(torch.tensor(rows))
    return tuple(plans)


def _owned_cpu_rows(gather, hidden, residual):
    """The traced rows of a layer's output (plus the residual vLLM defers to the next norm: the stream is their sum),
    as a tensor of their own on the CPU (vLLM reuses its buffers: nothing kept may be a view of them); None for none."""
    if gather is None:
        return None
    if isinstance(gather, tuple):
        start, end = gather
        rows = hidden[start:end] + residual[start:end] if residual is not None else hidden[start:end].clone()
    else:
        index = gather.to(hidden.device)
        rows = hidden.index_select(0, index)
        if residual is not None:
            rows.add_(residual.index_select(0, index))
    rows = rows.detach()
    return rows if rows.device.type == "cpu" else to_cpu(rows)  # already a tensor of its own on the CPU: no second copy


def prompt_ids_for_embeds(given, rows: int) -> list[int]:
    """The token ids a prompt_embeds request's rows stand for: the client's `qdebug_prompt_ids` when it is one int per
    row, else 0 for every row (the trace then says the ids are unknown)."""
    if isinstance(given, list) and len(given) == rows and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in given):
        return list(given)
    return [0] * rows


def _feature(spec) -> Feature:
    """A multimodal feature spec of vLLM's, reduced to what a trace needs."""
    data = getattr(spec, "data", None)
    grid: tuple[int, int, int] | None = None
    pixels: list[int] | None = None
    frames: int | None = None
    seconds: float | None = None
    try:
        for key in ("image_grid_thw", "video_grid_thw"):  # a video: its grid (t > 1) and its pixel values
            if data is not None and key in data:
                t, h, w = (int(x) for x in data[key].data.reshape(-1)[:3].tolist())
                grid = (t, h, w)
        for key in ("pixel_values", "pixel_values_videos"):
            if data is not None and key in data:
                pixels = list(data[key].data.shape)
        if data is not None and "second_per_grid_ts" in data:  # Qwen2.5-VL: seconds per temporal slice
            seconds = float(data["second_per_grid_ts"].data.reshape(-1)[0])
        for key in ("input_features", "input_audio_features"):  # audio (Qwen2.5-Omni: the kept frames only): its frames
            if data is not None and key in data:
                pixels = list(data[key].data.shape)
                if "feature_attention_mask" in data:  # those the mask keeps
                    frames = int(data["feature_attention_mask"].data.sum())
    except (AttributeError, TypeError, KeyError, ValueError):  # a feature spec of another shape: what it has
        pass
    pos = spec.mm_position
    return Feature(str(spec.modality), str(spec.identifier), int(pos.offset), int(pos.length), grid, pixels, frames, seconds)


def _int64():
    import torch

    return torch.int64


class TraceWriter:
    """Assembles and saves finished traces on a background thread, off the engine's step loop."""

    def __init__(self, assemble, trace_dir, clock=None) -> None:
        self.assemble = assemble  # (EngineRequest, generated ids) -> (Trace, index line)
        self.trace_dir = trace_dir
        self.clock = clock  # the worker's PluginClock: this thread's CPU seconds go to its writer_seconds
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="qdebug-trace-writer", daemon=True)
        self.thread.start()

    def submit(self, req: EngineRequest, generated: list[int], limit: int | None = None) -> None:
        """Queue a finished request for writing (`limit`: the bytes its folder may then hold, else it is not kept)."""
        self.queue.put((req, generated, limit))

    def drain(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until every queued trace is written: at shutdown."""
        self.queue.put(None)
        self.thread.join(timeout)

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            req, generated, limit = item
            start = time.thread_time()
            try:
                trace, line = self.assemble(req, generated)
                path = self.trace_dir.write(trace, req.name, line, limit)
                log.info("qdebug: traced request %s -> %s", shown(req.req_id, 200), path)
            except Exception as exc:  # the id is the client's: cut for vLLM's log
                log.warning("qdebug: could not write the trace of request %s (%s: %s)", shown(req.req_id, 200), type(exc).__name__, exc)
            if self.clock is not None:
                self.clock.writer_seconds += time.thread_time() - start
