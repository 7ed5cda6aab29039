"""The contracts between a traced forward pass and whoever listens to it or alters it, written down.

- `RecorderSink`: what the forward hooks of `trace/hooks.py` call on the calling thread's recorder
  (`Recorder` for one request, `replay.batched.BatchRecorder` for a padded batch).
- `Fault`: an object passed as `faults=` to the Recorder that may replace the encoder's rows or the decoder's
  input embeddings (`replay/faults.py`, `replay/wave_gate.py`; chosen by `--inject` through `replay/fault_registry.py`).
- `AttentionTap`: a wrapper around the attention kernel (`model/attention.py`), such as the Recorder's own tap,
  the layout watch and the head-first layout fault.
- `LinearTap`: the same around a linear-attention (gated delta rule) kernel call (`model/linear_attention.py`):
  the linear recorder, its layout watch and the linear head-first fault.
- `PipelineListener`: how the Recorder reports pipeline moments upward; replay/ and serve/ map them to their
  own events, so trace/ knows no event kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from qdebug.model.attention import AttentionCall
    from qdebug.model.linear_attention import LinearCall


@runtime_checkable
class RecorderSink(Protocol):
    """Receives one thread's forward passes from the hooks; a method's non-None return replaces what flows on."""

    def vision_input(self) -> None:
        """The vision tower is about to run."""

    def vision_output(self, output) -> object | None:
        """The vision tower's output (merged rows in `pooler_output`); returns a replacement output or None."""

    def encoder_output(self, module: str, kwargs: dict, output) -> None:
        """A declared encoder module (its dotted path) ran with `kwargs` (a vision call's `grid_thw`) and gave `output`
        (installed for adapters whose requests mix modalities: the rows are recorded per call, before any fault)."""

    def decoder_input(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """The language model is about to run (prefill, then one call per step); returns new (args, kwargs) or None."""

    def decoder_output(self, output) -> None:
        """The language model's output (`last_hidden_state`, after the final norm)."""

    def layer_output(self, layer: int, output) -> None:
        """Decoder layer `layer`'s output (hidden states first when a tuple)."""

    def layer_input(self, layer: int, hidden) -> None:
        """The hidden state entering decoder layer `layer` (`layer` = the layer count: the final norm's input)."""

    def logits_output(self, logits) -> None:
        """The lm_head's logits (B × T × V) of one forward pass."""

    def attention_tap(self, call: AttentionCall, proceed: Callable) -> tuple:
        """The sink's own attention tap (innermost of the thread's taps): returns (output, weights)."""

    def flush(self) -> None:
        """Generation ended: bring whatever the sink still holds on the model's device to CPU."""


class SinkBase(RecorderSink):
    """A RecorderSink that keeps nothing and changes nothing: subclasses override the moments they need."""

    def vision_input(self) -> None:
        """Nothing to do before the vision tower."""

    def vision_output(self, output) -> object | None:
        """Keep the vision tower's output as it is."""
        return None

    def encoder_output(self, module: str, kwargs: dict, output) -> None:
        """Ignore an encoder's call."""

    def decoder_input(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """Keep the decoder's inputs as they are."""
        return None

    def decoder_output(self, output) -> None:
        """Ignore the decoder's output."""

    def layer_output(self, layer: int, output) -> None:
        """Ignore a decoder layer's output."""

    def layer_input(self, layer: int, hidden) -> None:
        """Ignore what enters a decoder layer."""

    def logits_output(self, logits) -> None:
        """Ignore the logits."""

    def attention_tap(self, call: AttentionCall, proceed: Callable) -> tuple:
        """Run the attention call unchanged."""
        return proceed(call.query, call.key, call.value)

    def flush(self) -> None:
        """Nothing is held on a device."""


@runtime_checkable
class FamilySink(Protocol):
    """A family's extra recorder (deepstack, linear attention): fed by the thread's Recorder at prefill, never by
    hooks of its own, so concurrent traces on one model keep their evidence apart; `attach` adds it to the Trace.
    A subclass inherits a no-op for every moment it does not override."""

    def vision_output(self, output) -> None:
        """The vision tower's output, as the tower produced it."""
        return None

    def decoder_input(self, args: tuple, kwargs: dict) -> None:
        """The language model's inputs at prefill (as the caller passed them, before any fault)."""
        return None

    def layer_output(self, layer: int, output) -> None:
        """A decoder layer's output at prefill."""
        return None

    def layer_input(self, layer: int, hidden) -> None:
        """The hidden state entering a decoder layer at prefill (`layer` = the layer count: the final norm's input)."""
        return None

    def flush(self) -> None:
        """Generation ended: bring what is still on the model's device to CPU."""
        return None

    def attach(self, trace, loaded, prepared) -> None:
        """Add the family's evidence to the assembled Trace."""
        return None


@runtime_checkable
class Fault(Protocol):
    """Alters one request's data between encoder and decoder; each hook returns a replacement tensor or None."""

    def on_encoded(self, rec: RecorderSink, rows) -> object | None:
        """The merged rows (N × dim, all images) the encoder hands to the sync step; returns rows or None."""

    def on_decoder_input(self, rec: RecorderSink, embeds) -> object | None:
        """The embeddings (1 × seq × dim) the decoder receives at prefill; returns embeddings or None."""

    def on_position_ids(self, rec: RecorderSink, position_ids) -> object | None:
        """The position ids the decoder receives at prefill (rows × 1 × seq; MRoPE's (t, h, w) are the last three);
        returns position ids or None."""


class FaultBase(Fault):
    """A Fault that changes nothing: subclasses override the hook they act on."""

    def on_encoded(self, rec: RecorderSink, rows) -> object | None:
        """Leave the encoder's rows unchanged."""
        return None

    def on_decoder_input(self, rec: RecorderSink, embeds) -> object | None:
        """Leave the decoder's embeddings unchanged."""
        return None

    def on_position_ids(self, rec: RecorderSink, position_ids) -> object | None:
        """Leave the decoder's position ids unchanged."""
        return None


@runtime_checkable
class AttentionTap(Protocol):
    """Wraps one attention call; `proceed(query, key, value, nw=False, kern=None)` runs the rest."""

    def __call__(self, call: AttentionCall, proceed: Callable) -> tuple:
        """Run (or alter) the call and return (output, weights)."""


@runtime_checkable
class LinearTap(Protocol):
    """Wraps one linear-attention kernel call; `proceed(query, key, value, g, beta)` runs the rest."""

    def __call__(self, call: LinearCall, proceed: Callable) -> tuple:
        """Run (or alter) the call and return (output, recurrent state)."""


@runtime_checkable
class PipelineListener(Protocol):
    """Hears the pipeline moments of one request's trace (called from the thread that runs it)."""

    def encode_started(self) -> None:
        """The vision tower started encoding the request's images."""

    def rows_synced(self, offset: int | None, tokens: int) -> None:
        """The sync step put `tokens` visual rows into the token stream, the first at position `offset`."""

    def first_token(self) -> None:
        """The first generated token's logits are out (end of prefill)."""


class SilentListener(PipelineListener):
    """A PipelineListener that hears nothing (a trace nobody listens to)."""

    def encode_started(self) -> None:
        """Ignored."""

    def rows_synced(self, offset: int | None, tokens: int) -> None:
        """Ignored."""

    def first_token(self) -> None:
        """Ignored."""
