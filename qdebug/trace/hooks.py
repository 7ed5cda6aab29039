"""Hooks that feed a thread-local Recorder; installed in a context manager and always removed.

Hooks are installed once per model (reference-counted) and dispatch to the recorder of the calling
thread, so several threads can trace requests on one shared model at the same time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from qdebug.model.attention import AttentionCall, tapping

_local = threading.local()
_install_lock = threading.Lock()


class Recorder:
    """Collects raw tensors from one request's forward passes (prefill = call 0, then one call per step).

    `attn_layers`: decoder layers whose attention weights are kept (None = all).
    `on_stage(name)` is called at each stage boundary, after that stage's data is in: a debugger may block there.
    `image_positions`: key positions of image tokens; only those attention columns are kept.
    `query_positions`: prefill query positions whose attention rows are kept.
    """

    def __init__(
        self,
        *,
        attn_layers: set[int] | None = None,
        image_positions: list[int] | None = None,
        query_positions: list[int] | None = None,
        on_stage: Callable[[str], None] | None = None,
        keep_hidden: bool = True,
        faults: tuple = (),
        notify: Callable[..., None] | None = None,
    ):
        self.faults = tuple(faults)
        self.notify = notify or (lambda kind, **fields: None)
        self.attn_layers = attn_layers
        self.image_positions = image_positions or []
        # Where the merge step put the first visual row (a fault may move it); reported in `stitch` events.
        self.stitch_offset: int | None = self.image_positions[0] if self.image_positions else None
        self.query_positions = query_positions or []
        self.on_stage = on_stage or (lambda name: None)
        self.keep_hidden = keep_hidden
        self.vision_rows = None  # merged rows, all images (N × dim)
        self.decoder_calls = 0
        self.embeds = None  # merged embeddings the decoder received at prefill (seq × dim)
        self.position_ids = None  # position ids the decoder received at prefill (3 × seq)
        self.hidden: dict[int, object] = {}  # layer → prefill output (seq × dim)
        self.step_hidden: dict[int, list] = {}  # layer → new-token outputs of each decode step
        self.attn: dict[int, list] = {}  # layer → attention rows (H × q × image keys), prefill then steps
        self.final_hidden = None  # decoder output after the final norm at prefill (seq × dim)
        self.step_logits: list = []  # last-position logits of each lm_head call (V)

    @property
    def step(self) -> int:
        """Index of the forward pass in progress (0 = prefill)."""
        return self.decoder_calls - 1

    def wants_attention(self, layer: int) -> bool:
        """Whether this layer's attention weights are recorded."""
        return self.attn_layers is None or layer in self.attn_layers

    # hook bodies --------------------------------------------------------------
    # Faults (qdebug.replay.faults) may replace what flows on: `on_encoded(rec, rows)` the merged rows the
    # encoder hands to the merge step, `on_decoder_input(rec, embeds)` the embeddings the decoder receives.
    # The recorder keeps the encoder's true output as `encode` and what the decoder got as `sync`.
    def vision_input(self) -> None:
        self.notify("encode_start")

    def vision_output(self, output):
        rows = getattr(output, "pooler_output", output)
        self.vision_rows = rows.detach().clone()
        replaced = rows
        for fault in self.faults:
            hook = getattr(fault, "on_encoded", None)
            if hook is not None:
                new = hook(self, replaced)
                replaced = replaced if new is None else new
        self.on_stage("encode")
        if replaced is rows:
            return None
        output.pooler_output = replaced
        return output

    def decoder_input(self, args, kwargs):
        self.decoder_calls += 1
        if self.decoder_calls != 1:
            return None
        changed = False
        embeds = kwargs.get("inputs_embeds")
        for fault in self.faults:
            hook = getattr(fault, "on_decoder_input", None)
            if hook is not None and embeds is not None:
                new = hook(self, embeds)
                if new is not None:
                    embeds, changed = new, True
        pos = kwargs.get("position_ids")
        self.embeds = embeds[0].detach().clone() if embeds is not None else None
        if pos is not None:
            pos = pos[-3:] if pos.ndim == 3 else pos[None].expand(3, *pos.shape)
            self.position_ids = pos[:, 0].detach().clone()
        if self.image_positions:
            self.notify("stitch", offset=self.stitch_offset, tokens=len(self.image_positions))
        self.on_stage("sync")
        if changed:
            return args, {**kwargs, "inputs_embeds": embeds}
        return None

    def layer_output(self, layer: int, output) -> None:
        hidden = output[0] if isinstance(output, tuple) else output
        if self.step == 0:
            if self.keep_hidden:
                self.hidden[layer] = hidden[0].detach().clone()
            self.on_stage(f"layer.{layer}")
        else:
            self.step_hidden.setdefault(layer, []).append(hidden[0, -1].detach().clone())

    def decoder_output(self, output) -> None:
        if self.step == 0:
            self.final_hidden = output.last_hidden_state[0].detach().clone()

    def logits_output(self, logits) -> None:
        self.step_logits.append(logits[0, -1].detach().float().clone())
        if self.step == 0:
            self.notify("first_token")
            self.on_stage("logits")
        self.on_stage(f"step.{self.step}")

    def attention_tap(self, call: AttentionCall, proceed):
        """Attention tap: run the kernel with weights for recorded layers and keep the image columns."""
        if not self.wants_attention(call.layer) or not self.image_positions:
            return proceed(call.query, call.key, call.value)
        out, weights = proceed(call.query, call.key, call.value, True)
        if weights is None:  # a replaced (faulty) kernel may not produce weights
            return out, weights
        w = weights[0][:, :, self.image_positions]  # H × q × image keys
        if w.shape[1] > 1:
            w = w[:, self.query_positions]
        self.attn.setdefault(call.layer, []).append(w.detach().float().clone())
        return out, weights


def current_recorder() -> Recorder | None:
    """The recorder of the calling thread, if it is tracing."""
    return getattr(_local, "recorder", None)


def _dispatch(method: str):
    def hook(*args):
        rec = current_recorder()
        if rec is not None:
            return getattr(rec, method)(*args)
        return None

    return hook


def _install(model, adapter) -> list:
    handles = [
        adapter.vision_tower(model).register_forward_pre_hook(lambda m, a: _dispatch("vision_input")()),
        adapter.vision_tower(model).register_forward_hook(lambda m, a, out: _dispatch("vision_output")(out)),
        adapter.language_model(model).register_forward_pre_hook(
            lambda m, a, kw: _dispatch("decoder_input")(a, kw), with_kwargs=True
        ),
        adapter.language_model(model).register_forward_hook(lambda m, a, out: _dispatch("decoder_output")(out)),
        adapter.lm_head(model).register_forward_hook(lambda m, a, out: _dispatch("logits_output")(out)),
    ]
    for index, layer in enumerate(adapter.decoder_layers(model)):
        handles.append(
            layer.register_forward_hook(lambda m, a, out, i=index: _dispatch("layer_output")(i, out))
        )
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
def recording(model, adapter, recorder: Recorder, *taps) -> Iterator[Recorder]:
    """Record this thread's forward passes into `recorder` (attention tapped, hooks installed, all undone after)."""
    previous = current_recorder()
    _local.recorder = recorder
    try:
        with instrumented(model, adapter), tapping(*taps, recorder.attention_tap):
            yield recorder
    finally:
        _local.recorder = previous
