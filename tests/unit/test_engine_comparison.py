"""The endpoint replay's three-way comparison (analysis/engine_verdicts.apply_engine_comparison) on synthetic runs: one
real trace of the demo model, copied and moved at one stage to stand for the reference, the engine alone and the engine
in each burst, with the batch compositions the plugin's batch records would give. Same composition disagreeing is
nondeterminism; another composition is batch_dependent naming its partners; the engine alone apart from the
reference is server_mismatch at that stage; another request's rows in its stream is contaminated."""

from __future__ import annotations

import copy

import pytest

from qdebug.analysis.engine_batching import RunBatching
from qdebug.analysis.engine_verdicts import EngineRuns, apply_engine_comparison
from qdebug.findings import Finding
from qdebug.replay.report import ReplayReport, RequestOutcome
from qdebug.vocab import FindingKind, Severity, Verdict

OK, DIV, BD, SM, CON = Verdict.OK, Verdict.DIVERGED, Verdict.BATCH_DEPENDENT, Verdict.SERVER_MISMATCH, Verdict.CONTAMINATED


@pytest.fixture(scope="module")
def base(demo_trace):
    trace, _ = demo_trace
    return trace


def _moved(trace, stage: str, by: float = 0.5):
    """A copy of `trace` whose `stage` tensors are moved by `by` (it parts from `trace` there, and only there first)."""
    out = copy.deepcopy(trace)
    for name, t in out.tensors.items():
        if name.startswith(stage + ".") and t.is_floating_point():
            out.tensors[name] = t + by
    return out


def _with_encode(trace, rows):
    out = copy.deepcopy(trace)
    out.tensors["encode.0"] = rows.clone()
    return out


def _outcome(rid: str, bursts: int) -> RequestOutcome:
    return RequestOutcome(id=rid, reference="a red circle", local_reference="a red circle", burst_answers=["a red circle"] * bursts,
                          burst_verdicts=[OK] * bursts, burst_donors=[[] for _ in range(bursts)])


def _judge(outcomes: list[RequestOutcome], runs: EngineRuns, findings: list[Finding] | None = None):
    report = ReplayReport(source="capture.jsonl", kind="capture", requests=outcomes, findings=list(findings or []))
    found = apply_engine_comparison(report, runs)
    return report, found


def _shared(*others: str, call: tuple = (), step: tuple | None = None) -> RunBatching:
    """A run that shared its encoder call with `call` and its steps with `others` (its composition from both)."""
    return RunBatching(encoder_call=list(call), batch_step=list(others),
                       composition=((tuple((r, 0) for r in ("r", *call)),) if call else (), (tuple(sorted(("r", *others))),)))


def test_same_composition_disagreeing_is_nondeterminism(base):
    """Two bursts, the same batch each time (r with q), part from the isolated run and from each other at layer.1."""
    runs = EngineRuns(alone={"r": base}, bursts=[{"r": _moved(base, "layer.1", 0.5)}, {"r": _moved(base, "layer.1", 0.9)}],
                      batching={("r", 1): _shared("q"), ("r", 2): _shared("q")}, rows=[{}, {}])
    text = Finding(FindingKind.NONDETERMINISM, Severity.WARNING, "request r: its answers vary", request_id="r")
    report, found = _judge([_outcome("r", 2)], runs, [text])
    [out] = report.requests
    assert (out.verdict, out.stage, out.burst_verdicts) == (DIV, "layer.1", [DIV, DIV])
    kinds = [f.kind for f in found]
    assert kinds == [FindingKind.NONDETERMINISM] and found[0].stage == "layer.1"
    assert "in 2/2 burst(s) it parts from its isolated run at layer.1" in found[0].message
    assert text not in report.findings  # the answers' own story of r is replaced by the engine's


def test_a_parted_run_of_the_composition_of_one_that_agreed_is_nondeterminism(base):
    runs = EngineRuns(alone={"r": base}, bursts=[{"r": _moved(base, "layer.2")}, {"r": copy.deepcopy(base)}],
                      batching={("r", 1): _shared("q"), ("r", 2): _shared("q")}, rows=[{}, {}])
    report, found = _judge([_outcome("r", 2)], runs)
    assert report.requests[0].burst_verdicts == [DIV, OK] and report.requests[0].verdict == DIV
    assert [f.kind for f in found] == [FindingKind.NONDETERMINISM]
    alone = EngineRuns(alone={"r": base}, bursts=[{"r": _moved(base, "layer.2")}], batching={("r", 1): RunBatching()}, rows=[{}])
    report, found = _judge([_outcome("r", 1)], alone)  # nothing shared the run: no batch could have changed it
    assert report.requests[0].verdict == DIV and [f.kind for f in found] == [FindingKind.NONDETERMINISM]


def test_another_composition_is_batch_dependent_naming_the_encoder_calls_partners(base):
    """Burst 1 encodes r's image with q's and parts at encode, its rows now q's; burst 2 (r with s only) agrees."""
    q = _with_encode(base, base.tensors["encode.0"] * -1.0)
    runs = EngineRuns(alone={"r": base, "q": q},
                      bursts=[{"r": _with_encode(base, q.tensors["encode.0"]), "q": q}, {"r": copy.deepcopy(base), "q": q}],
                      batching={("r", 1): _shared("q", "s", call=("q",)), ("r", 2): _shared("s")}, rows=[{}, {}])
    report, found = _judge([_outcome("r", 2)], runs)
    [out] = report.requests
    assert (out.verdict, out.stage, out.burst_verdicts, out.burst_stages) == (BD, "encode", [BD, OK], ["encode", None])
    assert out.co_batched == [["q"], []]  # at encode: who shared the encoder call, not the step
    [finding] = [f for f in found if f.request_id == "r"]
    assert finding.kind == FindingKind.BATCH_DEPENDENT and finding.stage == "encode"
    assert "in 1/2 burst(s) (1) it parts from its isolated run inside the engine, first at encode in burst 1" in finding.message
    assert "it shared that encoder call with q" in finding.message
    rows = base.tensors["encode.0"].shape[0]
    assert f"item 0: {rows} of {rows} rows differ ({rows} are q's rows)" in finding.message, finding.message


def test_a_repeated_batch_that_parts_alike_each_time_is_batch_dependent_naming_the_steps_partners(base):
    parted = _moved(base, "layer.1")
    runs = EngineRuns(alone={"r": base}, bursts=[{"r": parted}, {"r": copy.deepcopy(parted)}],
                      batching={("r", 1): _shared("q", "s"), ("r", 2): _shared("q", "s")}, rows=[{}, {}])
    report, found = _judge([_outcome("r", 2)], runs)
    [out] = report.requests
    assert (out.verdict, out.stage, out.burst_verdicts, out.co_batched) == (BD, "layer.1", [BD, BD], [["q", "s"], ["q", "s"]])
    assert [f.kind for f in found] == [FindingKind.BATCH_DEPENDENT] and "it shared that step with q, s" in found[0].message


def test_the_engine_alone_apart_from_the_reference_is_server_mismatch_at_its_stage(base):
    """The engine alone parts from the local model at layer.2; each burst agrees with the engine alone (or parts only
    after layer.2, downstream of the engine's own fault): server_mismatch @layer.2, never batch_dependent."""
    engine = _moved(base, "layer.2")
    runs = EngineRuns(alone={"r": engine}, bursts=[{"r": copy.deepcopy(engine)}, {"r": _moved(engine, "layer.3")}],
                      local={"r": base}, batching={("r", 1): _shared("q"), ("r", 2): _shared("s")}, rows=[{}, {}])
    text = Finding(FindingKind.SERVER_MISMATCH, Severity.ERROR, "request r: the server answers otherwise", request_id="r")
    report, found = _judge([_outcome("r", 2)], runs, [text])
    [out] = report.requests
    assert (out.verdict, out.stage, out.burst_verdicts) == (SM, "layer.2", [SM, SM])
    [mismatch] = [f for f in found if f.kind == FindingKind.SERVER_MISMATCH]
    assert mismatch.stage == "layer.2" and "inside the engine, alone, it parts from the local model at layer.2" in mismatch.message
    assert text not in report.findings and not [f for f in found if f.kind in (FindingKind.BATCH_DEPENDENT, FindingKind.CONTAMINATION)]


def test_a_batch_dependent_burst_before_the_engines_own_fault_outranks_it(base):
    """The engine alone parts from the reference at layer.2, and one burst parts at layer.1 in another batch: the
    request is batch_dependent (the ranking: batch_dependent above server_mismatch), the mismatch still said."""
    engine = _moved(base, "layer.2")
    runs = EngineRuns(alone={"r": engine}, bursts=[{"r": _moved(engine, "layer.1")}], local={"r": base},
                      batching={("r", 1): _shared("q")}, rows=[{}])
    report, found = _judge([_outcome("r", 1)], runs)
    [out] = report.requests
    assert (out.verdict, out.stage, out.burst_verdicts) == (BD, "layer.1", [BD])
    assert {f.kind for f in found} == {FindingKind.SERVER_MISMATCH, FindingKind.BATCH_DEPENDENT}


def test_another_requests_rows_in_its_stream_is_contaminated_with_that_bursts_donor(base):
    runs = EngineRuns(alone={"r": base}, bursts=[{"r": copy.deepcopy(base)}, {"r": copy.deepcopy(base)}],
                      batching={("r", 1): _shared("q"), ("r", 2): _shared("q")},
                      rows=[{"r": ("q", {"q": 35})}, {"r": (None, {"own": 20, "s": 15})}])
    report, found = _judge([_outcome("r", 2)], runs)
    [out] = report.requests
    assert (out.verdict, out.stage, out.burst_verdicts, out.burst_donors) == (CON, "sync", [CON, CON], [["q"], ["s"]])
    assert out.donor is None  # the bursts name different donors: none is agreed
    [finding] = found
    assert finding.kind == FindingKind.CONTAMINATION and "(burst 1: q; burst 2: s)" in finding.message


def test_without_the_engines_trace_the_answers_verdict_stands(base):
    out = _outcome("r", 2)
    out.burst_verdicts, out.burst_donors = [CON, OK], [["q"], []]
    runs = EngineRuns(alone={"r": base}, bursts=[{}, {"r": copy.deepcopy(base)}], batching={}, rows=[{}, {}])
    report, _ = _judge([out], runs)
    assert report.requests[0].burst_verdicts == [CON, OK] and report.requests[0].verdict == CON and report.requests[0].donor == "q"
    untouched = _outcome("u", 1)
    report, found = _judge([untouched], EngineRuns(alone={}, bursts=[{}], rows=[{}]))
    assert report.requests[0].verdict == OK and report.requests[0].stage is None and found == []
