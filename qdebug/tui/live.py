"""What is known so far about a run paused at a stage: a partial Trace built from the live Recorder.

Runs in the stepper's worker thread while the forward pass waits (so the recorder's tensors are stable), and
uses the same assembly as a finished trace, limited to the stages reached; the complete trace replaces this
snapshot when the run ends.
"""

from __future__ import annotations

from qdebug.trace.assemble import assemble_trace
from qdebug.trace.runner import RecordPolicy, query_rows
from qdebug.vocab import StageName

PARTIAL_NOTE = "live snapshot: the complete trace arrives when the run finishes"


def snapshot(loaded, request, prepared, recorder, reached: list[str], options: RecordPolicy | None = None):
    """A Trace holding the stages in `reached` as far as the recorder has them (steps chosen greedily)."""
    if recorder is None:
        if set(reached) - {StageName.PREPROCESS}:
            return None
        # paused at preprocess the hooks are not attached yet: what preprocess captured needs no recorder
        from qdebug.trace.hooks import Recorder

        # with the query rows the run will keep, so the cursor starts on one (no layer has run: nothing to draw yet)
        recorder = Recorder(query_positions=query_rows((options or RecordPolicy()).queries, len(prepared.inputs["input_ids"][0])))
    # the prompt rows the recorder really keeps attention for (its policy's queries, the last prompt token by default):
    # a snapshot listing others would have its captured layers' rows matched to the wrong queries, and show none
    queries = list(recorder.query_positions)
    trace = assemble_trace(loaded, request, prepared, recorder, None, queries, options or RecordPolicy(), reached=reached)
    trace.meta.partial = True
    trace.meta.note = PARTIAL_NOTE
    return trace
