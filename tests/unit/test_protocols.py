"""The declared protocols (qdebug.trace.protocols) are what the recorders, faults and taps implement."""

import ast
import inspect
from pathlib import Path

import pytest

from qdebug.trace.protocols import AttentionTap, Fault, FaultBase, PipelineListener, RecorderSink, SinkBase

REPO = Path(__file__).resolve().parents[2]


def _public_methods(protocol) -> set[str]:
    return {name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")}


def test_recorders_are_recorder_sinks():
    from qdebug.replay.batched import BatchRecorder
    from qdebug.replay.events import EventLog
    from qdebug.trace.hooks import Recorder

    assert isinstance(Recorder(), RecorderSink)
    assert isinstance(BatchRecorder(["a"], [[(1, 3)]], EventLog()), RecorderSink)
    assert _public_methods(RecorderSink) == {
        "vision_input", "vision_output", "encoder_output", "decoder_input", "decoder_output", "layer_output", "layer_input", "logits_output",
        "attention_tap", "flush",
    }
    assert _public_methods(SinkBase) == _public_methods(RecorderSink)  # the no-op base implements every method


def test_family_recorders_are_family_sinks_fed_by_the_recorder():
    """Deepstack and linear-attention recorders install no hook of their own: they are FamilySinks the thread's
    Recorder feeds (so two threads on one model never share one)."""
    from qdebug.trace.deepstack_record import DeepstackRecorder
    from qdebug.trace.linear_record import LinearRecorder
    from qdebug.trace.protocols import FamilySink

    for rec in (DeepstackRecorder([0, 1]), LinearRecorder()):
        assert isinstance(rec, FamilySink) and FamilySink in type(rec).__mro__
    import qdebug.trace.deepstack_record as deepstack
    import qdebug.trace.linear_record as linear

    # what their compiled code calls (every function, method and nested function of both modules): no hook registration
    called = set().union(*(_names_called(module) for module in (deepstack, linear)))
    assert called and not {n for n in called if n.startswith("register_forward")}, sorted(called)


def _names_called(module) -> set[str]:
    """Every global and attribute name the module's own functions use (their code objects, nested ones included)."""
    names, stack = set(), [v for v in vars(module).values() if getattr(v, "__module__", None) == module.__name__]
    while stack:
        item = stack.pop()
        if inspect.isclass(item):
            stack.extend(v.fget if isinstance(v, property) else getattr(v, "__func__", v) for v in vars(item).values())
        elif inspect.isfunction(item):
            stack.append(item.__code__)
        elif inspect.iscode(item):
            names.update(item.co_names)
            stack.extend(c for c in item.co_consts if inspect.iscode(c))
    return names


def test_every_fault_class_is_a_fault():
    from qdebug.replay.faults import OffsetShift, SharedBufferClient, TemporalIdsFlat
    from qdebug.replay.shared_buffer import SharedVisualBuffer
    from qdebug.replay.wave_gate import ServedBufferClient, WaveGate

    def events(kind, **fields):
        return None

    faults = [OffsetShift(1, None, events), SharedBufferClient(SharedVisualBuffer([]), "a", events), ServedBufferClient(WaveGate(0, 0.1), "a", events),
              TemporalIdsFlat()]
    for fault in faults:
        assert isinstance(fault, Fault), type(fault).__name__
    assert _public_methods(FaultBase) == _public_methods(Fault) == {"on_encoded", "on_decoder_input", "on_position_ids"}


def test_a_fault_base_changes_nothing():
    assert FaultBase().on_encoded(None, object()) is None
    assert FaultBase().on_decoder_input(None, object()) is None


def test_head_first_is_an_attention_tap():
    from qdebug.trace.hooks import Recorder
    from qdebug.trace.layout_faults import HeadFirst

    assert isinstance(HeadFirst(0), AttentionTap)
    assert isinstance(Recorder().attention_tap, AttentionTap)



def test_every_tap_declares_its_protocol():
    """Taps name the protocol they implement (a bare callable would satisfy isinstance, so check the bases)."""
    from qdebug.analysis.detectors.layout import LayoutWatch
    from qdebug.analysis.detectors.linear_layout import LinearLayoutWatch
    from qdebug.trace.layout_faults import HeadFirst, HeadFirstLinear
    from qdebug.trace.linear_record import LinearRecorder
    from qdebug.trace.protocols import LinearTap

    for tap in (HeadFirst, LayoutWatch):
        assert AttentionTap in tap.__mro__ and LinearTap not in tap.__mro__, tap
    for tap in (HeadFirstLinear, LinearRecorder, LinearLayoutWatch):
        assert LinearTap in tap.__mro__ and AttentionTap not in tap.__mro__, tap

def test_request_events_are_a_pipeline_listener_mapped_to_event_kinds():
    from qdebug.replay.events import EventLog
    from qdebug.vocab import EventKind

    log = EventLog()
    listener = log.for_request("a")
    assert isinstance(listener, PipelineListener)
    listener.encode_started()
    listener.rows_synced(4, 9)
    listener.first_token()
    log.for_request("b")(EventKind.BUFFER_OVERWRITE, offset=0, tokens=9, victim="a")
    got = [(e.kind, e.request_id, e.offset, e.tokens, e.donor) for e in log.events]
    assert got == [
        (EventKind.ENCODE_START, "a", None, None, None),
        (EventKind.SYNC, "a", 4, 9, None),
        (EventKind.FIRST_TOKEN, "a", None, None, None),
        (EventKind.BUFFER_OVERWRITE, "a", 0, 9, "b"),  # logged against the victim, the writer as donor
    ]


@pytest.mark.parametrize("path", sorted((REPO / "qdebug" / "trace").rglob("*.py")), ids=lambda p: p.name)
def test_trace_names_no_event_kind(path):
    """trace/ reports pipeline moments through PipelineListener; it never names replay's event kinds."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert "EventKind" not in names | imported


def test_the_recorder_calls_every_fault_hook_directly():
    """Every fault subclasses FaultBase, so the Recorder calls `on_position_ids` as it calls the other hooks: a real
    Recorder at prefill hands each fault the embeddings and the position ids, and what a fault returns flows on."""
    import torch

    from qdebug.trace.hooks import Recorder

    assert FaultBase().on_position_ids(None, object()) is None

    class Flatten(FaultBase):
        """Replaces the position ids with zeros, and records what it was handed."""

        def __init__(self):
            self.seen = []

        def on_position_ids(self, rec, ids):
            self.seen.append(ids)
            return torch.zeros_like(ids)

    first, second = Flatten(), FaultBase()
    recorder = Recorder(faults=(first, second))
    embeds, ids = torch.ones(1, 4, 8), torch.arange(4).expand(3, 1, 4).clone()
    out = recorder.decoder_input((), {"inputs_embeds": embeds, "position_ids": ids})
    assert len(first.seen) == 1 and torch.equal(first.seen[0], ids)
    assert out is not None and torch.equal(out[1]["position_ids"], torch.zeros_like(ids))  # the replacement flows on
    assert torch.equal(recorder.position_ids, torch.zeros(3, 4, dtype=ids.dtype))  # and is what sync measures
