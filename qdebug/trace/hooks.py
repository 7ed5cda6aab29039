"""Hooks that feed a thread-local RecorderSink (the Recorder); installed in a context manager and always removed.

Hooks are installed once per model (reference-counted) and call the sink of the calling thread, so several
threads can trace requests on one shared model at the same time.

The recorder is qdebug's one device boundary: whatever it keeps leaves the hook detached and copied to
CPU (`to_cpu`), so traces, analysis, render and the TUI never hold a device tensor, whichever device
(or devices, with `--device-map auto`) each layer sits on. Storage dtypes:
- encoder rows, merged embeddings, hidden states: the model's own dtype (bf16 stays bf16: the exact
  values the model computed, at half float32's size);
- logits and attention weights: the dtype the model computed them in (a bf16 model's are bf16: float32 would
  double the trace and add nothing); the Trace hands them out as float32, which top-k, KL and probabilities need;
- position ids: int64.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from qdebug.model.attention import AttentionCall, tapping
from qdebug.vocab import StageName, layer_stage, step_stage

from .protocols import FamilySink, Fault, PipelineListener, RecorderSink, SilentListener

if TYPE_CHECKING:
    from torch import Tensor

_local = threading.local()
_install_lock = threading.Lock()


def to_cpu(t, dtype=None):
    """A detached CPU copy of `t` (optionally cast): the recorder's one way out of the model's device."""
    return t.detach().to("cpu", dtype=dtype, copy=True)


class Recorder(RecorderSink):
    """Collects one request's forward passes as CPU tensors (prefill = call 0, then one call per step).

    `attn_layers`: decoder layers whose attention weights are kept (None = all, empty = none).
    `on_stage(name)` is called at each stage boundary, after that stage's data is in: a debugger may block there.
    `faults` may replace the encoder's rows or the decoder's embeddings; `listener` hears the pipeline moments.
    `image_positions`: key positions of image tokens; only those attention columns are kept.
    `query_positions`: prefill query positions whose attention rows are computed and kept (each decode
    step's single query row is always kept).
    `keep_hidden`: keep every prefill row of every layer's output; otherwise per-layer statistics plus the
    `hidden_rows` (default: the last prompt position, whose output chose the first token; [] keeps no rows,
    not even each step's new-token row).
    """

    def __init__(
        self,
        *,
        attn_layers: set[int] | None = None,
        image_positions: list[int] | None = None,
        query_positions: list[int] | None = None,
        on_stage: Callable[[str], None] | None = None,
        keep_hidden: bool = True,
        hidden_rows: list[int] | None = None,
        faults: tuple[Fault, ...] = (),
        listener: PipelineListener | None = None,
        family: tuple[FamilySink, ...] = (),
    ):
        self.faults = tuple(faults)
        # A family's extra recorders (deepstack, linear attention) hear the prefill through this thread's sink.
        self.family = tuple(family)
        self.listener = listener or SilentListener()
        self.attn_layers = attn_layers
        self.image_positions = image_positions or []
        # Where the sync step put the first visual row (a fault may move it); reported by `rows_synced`.
        self.sync_offset: int | None = self.image_positions[0] if self.image_positions else None
        self.query_positions = query_positions or []
        self.on_stage = on_stage or (lambda name: None)
        self.keep_hidden = keep_hidden
        self.hidden_rows = hidden_rows
        # Each generated step's scores after the checkpoint's logits processors (filled by the runner after generate).
        self.processed_scores: list = []
        # Each declared encoder's calls at prefill, in order: (module path, grid_thw or None, rows), CPU: the `encode` rows.
        self.encoder_calls: list[tuple[str, object, object]] = []
        self.decoder_calls = 0
        self.embeds: Tensor | None = None  # merged embeddings the decoder received at prefill (seq × dim)
        self.position_ids: Tensor | None = None  # position ids the decoder received at prefill (3 × seq)
        self.hidden: dict[int, Tensor] = {}  # layer → prefill output (seq × dim), with keep_hidden
        self.hidden_kept: dict[int, object] = {}  # layer → prefill output at `hidden_rows` (rows × dim)
        self.hidden_stats: dict[int, dict | tuple] = {}  # layer → statistics of the whole prefill output (a pair on device until flush)
        self.step_hidden: dict[int, list] = {}  # layer → new-token outputs of each decode step
        self.attn: dict[int, list] = {}  # layer → attention rows (H × q × image keys), prefill then steps
        self.attn_skipped: set[int] = set()  # layers whose q/k did not have the expected layout
        self.final_hidden = None  # decoder output after the final norm at prefill (seq × dim)
        self.step_logits: list = []  # last-position logits of each lm_head call (V)
        self._pending = False  # copies still on the model's device (see `_hold`)

    def _hold(self, t, dtype=None):
        """A detached copy of `t`: on CPU at once, or kept on its device until `flush` (no host sync per layer
        while generate runs; the copy happens when generation ends, or before anything reads the recorder)."""
        if t.device.type == "cpu":
            return to_cpu(t, dtype)
        self._pending = True
        return t.detach().to(dtype=dtype, copy=True)

    def flush(self) -> None:
        """Bring every held copy to CPU: after this the recorder holds no device tensor."""
        from .stats import stats_from

        for extra in self.family:
            extra.flush()
        self.hidden_stats = {k: v if isinstance(v, dict) else stats_from(*v) for k, v in self.hidden_stats.items()}
        if not self._pending:
            return
        self.hidden = {k: to_cpu(v) for k, v in self.hidden.items()}
        self.hidden_kept = {k: to_cpu(v) for k, v in self.hidden_kept.items()}
        self.step_hidden = {k: [to_cpu(t) for t in v] for k, v in self.step_hidden.items()}
        self.attn = {k: [to_cpu(t) for t in v] for k, v in self.attn.items()}
        self.step_logits = [to_cpu(t) for t in self.step_logits]
        self._pending = False

    @property
    def step(self) -> int:
        """Index of the forward pass in progress (0 = prefill)."""
        return self.decoder_calls - 1

    def wants_attention(self, layer: int) -> bool:
        """Whether this layer's attention weights are recorded."""
        return self.attn_layers is None or layer in self.attn_layers

    # RecorderSink ------------------------------------------------------------
    # Faults may replace what flows on: `on_encoded` the merged rows the encoder hands to the sync step,
    # `on_decoder_input` the embeddings the decoder receives. The recorder keeps the encoder's true output as
    # `encode` and what the decoder got as `sync`.
    def vision_input(self) -> None:
        """Tell the listener encoding started."""
        self.listener.encode_started()

    def vision_output(self, output):
        """Let each fault replace what the sync step receives (`encoder_output`, which ran first, kept the rows)."""
        for extra in self.family:
            extra.vision_output(output)
        rows = getattr(output, "pooler_output", output)
        replaced = rows
        for fault in self.faults:
            new = fault.on_encoded(self, replaced)
            replaced = replaced if new is None else new
        self.on_stage(StageName.ENCODE)
        if replaced is rows:
            return None
        output.pooler_output = replaced
        return output

    def encoder_output(self, module: str, kwargs: dict, output) -> None:
        """Keep one encoder call's rows (its merged `pooler_output`, else its hidden states) and the grid it was given."""
        if self.decoder_calls:
            return  # encoders run before the first decoder call; a later call (none in generate) is not this prefill
        rows = getattr(output, "pooler_output", None)
        rows = rows if rows is not None else getattr(output, "last_hidden_state", output)
        grid = kwargs.get("grid_thw")
        self.encoder_calls.append((module, to_cpu(grid) if grid is not None else None, to_cpu(rows)))

    def decoder_input(self, args, kwargs):
        """At prefill: let faults replace the embeddings, keep them and the position ids, report the sync step."""
        self.decoder_calls += 1
        if self.decoder_calls != 1:
            return None
        for extra in self.family:
            extra.decoder_input(args, kwargs)
        changed = False
        embeds = kwargs.get("inputs_embeds")
        if embeds is not None:
            for fault in self.faults:
                new = fault.on_decoder_input(self, embeds)
                if new is not None:
                    embeds, changed = new, True
        given = kwargs.get("position_ids")
        if given is not None:
            for fault in self.faults:  # every Fault has the hook (FaultBase's is a no-op)
                new = fault.on_position_ids(self, given)
                if new is not None:
                    given, changed = new, True
        self.embeds = to_cpu(embeds[0]) if embeds is not None else None
        if given is not None:  # what the decoder gets, after any fault: sync measures these
            pos = given[-3:] if given.ndim == 3 else given[None].expand(3, *given.shape)
            self.position_ids = to_cpu(pos[:, 0])
        if self.image_positions:
            self.listener.rows_synced(self.sync_offset, len(self.image_positions))
        self.on_stage(StageName.SYNC)
        if changed:
            return args, {**kwargs, "inputs_embeds": embeds, **({"position_ids": given} if given is not None else {})}
        return None

    def layer_output(self, layer: int, output) -> None:
        """Keep a prefill layer's statistics and rows (or a decode step's new-token row)."""
        from .stats import stats_tensor

        hidden = output[0] if isinstance(output, tuple) else output
        if self.step == 0:
            # Statistics over every row, computed on the layer's device; read back at `flush`.
            self.hidden_stats[layer] = (stats_tensor(hidden[0]), tuple(hidden[0].shape))
            if self.keep_hidden:
                self.hidden[layer] = self._hold(hidden[0])
            elif self.hidden_rows != []:
                from qdebug.model.device_index import select_positions

                rows = self.hidden_rows if self.hidden_rows is not None else [hidden.shape[1] - 1]
                self.hidden_kept[layer] = self._hold(select_positions(hidden[0], 0, rows))
            for extra in self.family:
                extra.layer_output(layer, output)
            self.on_stage(layer_stage(layer))
        elif self.keep_hidden or self.hidden_rows != []:
            self.step_hidden.setdefault(layer, []).append(self._hold(hidden[0, -1]))

    def layer_input(self, layer: int, hidden) -> None:
        """At prefill, hand what enters a layer (or the final norm) to the family's recorders."""
        if self.step == 0:
            for extra in self.family:
                extra.layer_input(layer, hidden)

    def decoder_output(self, output) -> None:
        """Keep the prefill's final-norm output."""
        if self.step == 0:
            self.final_hidden = to_cpu(output.last_hidden_state[0])

    def logits_output(self, logits) -> None:
        """Keep the last position's logits; at prefill, tell the listener the first token is out."""
        # The model's own dtype, held on its device until `flush` (a copy per step would wait for the GPU).
        self.step_logits.append(self._hold(logits[0, -1]))
        if self.step == 0:
            self.listener.first_token()
            self.on_stage(StageName.LOGITS)
        self.on_stage(step_stage(self.step))

    def attention_tap(self, call: AttentionCall, proceed):
        """Attention tap: the layer computes with its own kernel; weights are computed only for the kept
        query rows (prefill) or the new token (steps), and only their image columns are kept."""
        from qdebug.model.attention import weights_for_rows
        from qdebug.model.device_index import select_positions

        if not self.wants_attention(call.layer) or not self.image_positions:
            return proceed(call.query, call.key, call.value)
        out, weights = proceed(call.query, call.key, call.value)
        q_len = call.query.shape[2]
        rows = self.query_positions if q_len > 1 else [q_len - 1]
        heads = getattr(getattr(call.module, "config", None), "num_attention_heads", None)
        if call.layer in self.attn_skipped or not rows or max(rows) >= q_len or (heads is not None and call.query.shape[1] != heads):
            # q is not B × H × T × D here (a layout fault, which LayoutWatch reports): the layer keeps no rows at
            # all, so every kept layer has one row per entry of the trace's `attn_queries`.
            self.attn_skipped.add(call.layer)
            self.attn.pop(call.layer, None)
            return out, weights
        if weights is None:  # SDPA/flash give no weights: the eager formula over the kept rows only
            selected = weights_for_rows(call.module, call.query, call.key, call.value, call.mask, rows, **call.kwargs)
        else:  # the eager kernel already computed every row
            selected = select_positions(weights, 2, rows)
        w = select_positions(selected[0], -1, self.image_positions)  # H × q × image keys
        # Kept in the dtype the kernel computed them in (eager softmaxes in float32, then casts to the model's dtype):
        # float32 would double a bf16 model's trace and add no information. The trace reads them as float32.
        self.attn.setdefault(call.layer, []).append(self._hold(w))
        return out, weights


def current_recorder() -> RecorderSink | None:
    """The sink of the calling thread, if it is tracing."""
    return getattr(_local, "recorder", None)


# The hooks, installed once per model: each calls the calling thread's sink, if any (None leaves the module's
# inputs or output as they are).
def _vision_input(module, args) -> None:
    sink = current_recorder()
    if sink is not None:
        sink.vision_input()


def _vision_output(module, args, output):
    sink = current_recorder()
    return None if sink is None else sink.vision_output(output)


def _decoder_input(module, args, kwargs):
    sink = current_recorder()
    return None if sink is None else sink.decoder_input(args, kwargs)


def _decoder_output(module, args, output) -> None:
    sink = current_recorder()
    if sink is not None:
        sink.decoder_output(output)


def _logits_output(module, args, output) -> None:
    sink = current_recorder()
    if sink is not None:
        sink.logits_output(output)


def _layer_output(layer: int) -> Callable:
    def hook(module, args, output) -> None:
        sink = current_recorder()
        if sink is not None:
            sink.layer_output(layer, output)

    return hook


def _encoder_output(path: str) -> Callable:
    def hook(module, args, kwargs, output) -> None:
        sink = current_recorder()
        if sink is not None:
            sink.encoder_output(path, kwargs, output)

    return hook


def _layer_input(layer: int) -> Callable:
    def hook(module, args, kwargs) -> None:
        sink = current_recorder()
        if sink is not None:
            sink.layer_input(layer, args[0] if args else kwargs["hidden_states"])

    return hook


def _install(model, adapter) -> list:
    vision, language = adapter.vision_tower(model), adapter.language_model(model)
    handles = [
        vision.register_forward_pre_hook(_vision_input),
        vision.register_forward_hook(_vision_output),
        language.register_forward_pre_hook(_decoder_input, with_kwargs=True),
        language.register_forward_hook(_decoder_output),
        adapter.lm_head(model).register_forward_hook(_logits_output),
    ]
    from qdebug.model.adapters.encoders import module_at

    # Every declared encoder's calls, seen first (prepend): its own rows, before any fault replaces them.
    for path in dict.fromkeys(e.module for e in adapter.encoders()):
        handles.append(module_at(model, path).register_forward_hook(_encoder_output(path), with_kwargs=True, prepend=True))
    layers = adapter.decoder_layers(model)
    for index, layer in enumerate(layers):
        handles.append(layer.register_forward_hook(_layer_output(index)))
        handles.append(layer.register_forward_pre_hook(_layer_input(index), with_kwargs=True))
    norm = getattr(language, "norm", None)
    if norm is not None:  # what leaves the last layer (plus anything added after it) enters the final norm
        handles.append(norm.register_forward_pre_hook(_layer_input(len(layers)), with_kwargs=True))
    return handles


@contextmanager
def instrumented(model, adapter) -> Iterator[None]:
    """Install the recording hooks on `model` for the duration (shared by threads; removed by the last one out)."""
    with _install_lock:
        count, handles = getattr(model, "_qdebug_hooks", (0, []))
        if count == 0:
            handles = _install(model, adapter)
        model._qdebug_hooks = (count + 1, handles)
    try:
        yield
    finally:
        with _install_lock:
            count, handles = model._qdebug_hooks
            if count == 1:
                for h in handles:
                    h.remove()
                handles = []
            model._qdebug_hooks = (count - 1, handles)


@contextmanager
def not_recording() -> Iterator[None]:
    """Run model modules without feeding this thread's recorder (e.g. the lm_head while assembling a trace)."""
    previous = current_recorder()
    _local.recorder = None
    try:
        yield
    finally:
        _local.recorder = previous


@contextmanager
def recording(model, adapter, recorder: RecorderSink, *taps) -> Iterator[RecorderSink]:
    """Record this thread's forward passes into `recorder` (attention tapped, hooks installed, all undone after)."""
    previous = current_recorder()
    _local.recorder = recorder
    try:
        with instrumented(model, adapter), tapping(*taps, recorder.attention_tap):
            yield recorder
        recorder.flush()
    finally:
        _local.recorder = previous
