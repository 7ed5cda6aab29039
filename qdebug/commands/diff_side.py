"""One side of a `qdebug diff` comparison: how it runs (`DiffSide`) and its trace with the layout watches (`trace_side`).

Shared by `diff` and `diff --engine` (`engine_diff.py`), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from qdebug.replay.fault_registry import Injection


@dataclass
class DiffSide:
    """How one side of a comparison runs; `inject` is the fault it plants (`--inject`, B only)."""

    label: str
    _: KW_ONLY
    device: str = "auto"
    dtype: str = "auto"
    attn_kernel: str = "eager"
    input_path: str = "ids"
    inject: Injection | None = None


def trace_side(loaded, side: DiffSide, request):
    """(Trace, findings of the layout watches and the deepstack check) for one side's run of `request`."""
    from qdebug.analysis.detectors.layout import LayoutWatch
    from qdebug.replay.fault_registry import Command, PlantContext, Planter
    from qdebug.trace.runner import RecordPolicy, prepare, trace_request

    prepared = prepare(loaded, request)
    planter = side.inject.planter(PlantContext(Command.DIFF, loaded)) if side.inject is not None else Planter()
    attention_faults, linear_faults = planter.taps()
    text = loaded.adapter.text_config(loaded.config)
    prompt_len = int(prepared.inputs["input_ids"].shape[1])
    watch = LayoutWatch(int(text.num_attention_heads), int(text.num_key_value_heads), loaded.adapter.head_dim(loaded.config), prompt_len)
    from qdebug.commands.linear_diff import linear_taps

    lin_taps, lin_watch = linear_taps(loaded, linear_faults, prompt_len)
    taps = (*attention_faults, watch)
    # Every row of every layer is kept (the diff names the first row that parts); attention weights are a
    # side computation over the kept query rows, so each run keeps its own kernel everywhere.
    with lin_taps():
        faults = planter.faults(request.request_id, request, None)
        trace = trace_request(loaded, request, RecordPolicy(keep_hidden=True), taps=taps, prepared=prepared, input_path=side.input_path,
                              faults=faults)
    from qdebug.analysis.detectors.deepstack import deepstack_findings

    deepstack = deepstack_findings(trace)  # e.g. an inputs_embeds path dropping the features
    return trace, watch.findings + (lin_watch.findings if lin_watch else []) + deepstack
