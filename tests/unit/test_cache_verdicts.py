"""An endpoint replay's cache verdicts from the engine's record of cache reads (analysis.cache_verdicts), and its warm
run against its cold run (analysis.warm), on reports and reads built here: the stage is the first cache in pipeline
order that served another's content, the donor is named as the capture names it, every read of another's content is a
finding, a warm run that parts with no such read is not blamed on a cache, and reads of a request's own content are
one folded info line."""

from __future__ import annotations

from qdebug.analysis.cache_verdicts import judge_cache_reads, provenance_summary, run_reads
from qdebug.analysis.warm import settle_warm
from qdebug.engine.cache_reads import CacheRead, MediaPrint
from qdebug.replay.report import ReplayReport, RequestOutcome
from qdebug.vocab import CacheKind, CacheReuse, FindingKind, Severity, Verdict

TAG = "qdebug-replay-abc"
PHASES = ["reference", "burst-1", "warm"]
FRESH = {"reference", "burst-1"}
ORIGINS = {f"{TAG}.{rid}.{p}": (rid, p) for rid in ("req-01", "req-02", "req-03") for p in PHASES}


def _read(cache: CacheKind, reuse: CacheReuse, origin: str, start: int = 3, end: int = 67, item: int | None = 0) -> CacheRead:
    media = [MediaPrint(0, "image", "aaaa0000", 3, 64)]
    return CacheRead(cache, "vllm-id-r", "vllm-id-o", reuse, start, end, item=item, origin_name=origin, media=media,
                     origin_media=media, why=f"{reuse} why")


def _report(**warm) -> ReplayReport:
    base = {"reference": "a red circle", "burst_verdicts": [Verdict.OK], "burst_donors": [[]], "burst_stages": [None],
            "warm_answer": "a red circle", "warm_verdict": Verdict.OK, "warm_parted": False}
    outs = [RequestOutcome(id=rid, **{**base, **warm.get(rid, {})}) for rid in ("req-01", "req-02", "req-03")]
    return ReplayReport(source="c.jsonl", kind="capture", requests=outs, endpoint="http://x/v1")


def _judge(report: ReplayReport, reads: dict, where: dict | None = None) -> list:
    found = judge_cache_reads(report, run_reads(reads, ORIGINS, PHASES), PHASES, FRESH, where or {})
    report.findings += found
    return found


def test_the_stage_is_the_first_cache_in_pipeline_order_and_every_wrong_read_is_a_finding():
    report = _report()
    reads = {"warm": {"req-02": [_read(CacheKind.PREFIX, CacheReuse.OTHER, f"{TAG}.req-03.warm", 0, 64, None),
                                 _read(CacheKind.ENCODER, CacheReuse.OTHER, f"{TAG}.req-01.reference")]},
             "burst-1": {"req-02": [_read(CacheKind.ENCODER, CacheReuse.OTHER, f"{TAG}.req-01.reference")]}}
    found = _judge(report, reads)
    out = report.outcome("req-02")
    assert (out.verdict, out.stage, out.donor) == (Verdict.CACHE_CONTAMINATED, "encoder_cache", "req-01")
    assert out.cache_read["what"] == "image item 0 (positions 3..66)" and out.cache_read["phase"] == "warm"
    assert (out.warm_verdict, out.warm_stage) == (Verdict.CACHE_CONTAMINATED, "encoder_cache")
    assert out.burst_verdicts == [Verdict.CACHE_CONTAMINATED] and out.burst_stages == ["encoder_cache"]
    wrong = [f for f in found if f.kind == FindingKind.CACHE_READ and f.severity == Severity.ERROR]
    assert sorted((f.stage, f.donor) for f in wrong) == [("encoder_cache", "req-01"), ("encoder_cache", "req-01"), ("prefix_cache", "req-03")]
    assert any("request req-02 (warm run): the prefix_cache served positions 0..63 computed by req-03 (warm)" in f.message for f in wrong)
    story = found[0]  # the verdict first, then its reads
    assert story.kind == FindingKind.WARM_RUN and story.severity == Severity.ERROR and story.stage == "encoder_cache"
    assert "cache_contaminated @encoder_cache" in story.message and "in 2 of its runs (burst-1, warm)" in story.message
    assert "does not part from its cold run (its cold runs were served another's content too: burst-1)" in story.message
    assert [o.verdict for o in report.requests] == [Verdict.OK, Verdict.CACHE_CONTAMINATED, Verdict.OK]
    # the cold run's read despite fresh identities is said once
    (cold,) = [f for f in found if f.kind == FindingKind.CACHE_READ and f.severity == Severity.WARNING]
    assert "1 cache read(s) in runs sent fresh cache identities (burst-1" in cold.message


def test_a_warm_run_that_parts_with_a_wrong_read_says_where_and_one_with_none_is_not_blamed_on_a_cache():
    report = _report(**{"req-02": {"warm_answer": "a blue square", "warm_verdict": Verdict.DIVERGED, "warm_parted": True},
                        "req-03": {"warm_answer": "a blue square", "warm_verdict": Verdict.DIVERGED, "warm_parted": True}})
    reads = {"warm": {"req-02": [_read(CacheKind.PROCESSOR, CacheReuse.OTHER, f"{TAG}.req-01.warm")],
                      "req-03": [_read(CacheKind.PREFIX, CacheReuse.SAME, f"{TAG}.req-01.warm", 0, 32, None)]}}
    found = _judge(report, reads, where={"req-02": "at encode (max |diff| 3.1)", "req-03": ""})
    settle_warm(report, True, {"req-02": "at encode (max |diff| 3.1)", "req-03": ""})
    two, three = report.outcome("req-02"), report.outcome("req-03")
    assert (two.verdict, two.stage, two.donor) == (Verdict.CACHE_CONTAMINATED, "processor_cache", "req-01")
    assert "its warm run parts from its cold run at encode (max |diff| 3.1): it answers 'a blue square'" in found[0].message
    assert three.verdict == Verdict.DIVERGED and three.stage is None  # as the burst rules give: never a cache verdict
    (parted,) = [f for f in report.findings if f.kind == FindingKind.WARM_RUN and f.request_id == "req-03"]
    assert "not blamed on a cache" in parted.message and parted.severity == Severity.WARNING
    (legit,) = [f for f in report.findings if f.kind == FindingKind.CACHE_READ and f.request_id == "req-03"]
    assert legit.severity == Severity.INFO and "warm: prefix_cache positions 0..31 from req-01 (warm)" in legit.message
    assert not [f for f in report.findings if f.kind == FindingKind.WARM_RUN and f.request_id == "req-02" and "not blamed" in f.message]


def test_a_warm_run_judged_by_answers_alone_moves_only_a_verdict_still_ok_or_diverged():
    report = _report(**{"req-01": {"verdict": Verdict.SERVER_MISMATCH, "warm_verdict": Verdict.CONTAMINATED, "warm_parted": True,
                                   "warm_donor": "req-02"},
                        "req-02": {"warm_verdict": Verdict.CONTAMINATED, "warm_parted": True, "warm_donor": "req-01"}})
    settle_warm(report, None)
    assert report.outcome("req-01").verdict == Verdict.SERVER_MISMATCH  # texts weigh less than the engine's own evidence
    assert (report.outcome("req-02").verdict, report.outcome("req-02").donor) == (Verdict.CONTAMINATED, "req-01")
    said = [f.message for f in report.findings if f.kind == FindingKind.WARM_RUN]
    assert len(said) == 2 and all("pass --engine-traces DIR" in m and "no cache is blamed without it" in m for m in said)


def test_a_donor_outside_the_replay_is_named_by_the_engine_and_a_worse_verdict_stays():
    report = _report(**{"req-01": {"verdict": Verdict.CONTAMINATED, "donor": "req-03", "stage": "sync"}})
    reads = {"warm": {"req-01": [_read(CacheKind.ENCODER, CacheReuse.OTHER, "someone-else\x1b[31m")],
                      "req-02": [_read(CacheKind.CONNECTOR, CacheReuse.UNVERIFIED, "")]}}
    found = _judge(report, reads)
    one = report.outcome("req-01")
    assert (one.verdict, one.stage, one.donor) == (Verdict.CONTAMINATED, "sync", "req-03")  # a stream of another's rows ranks higher
    assert one.cache_read["donor"] == "someone-else\\x1b[31m" and one.cache_read["donor_phase"] is None  # data, escaped
    assert report.outcome("req-02").verdict == Verdict.OK  # an unverified read is no verdict, but it is said
    (unverified,) = [f for f in found if f.request_id == "req-02"]
    assert unverified.severity == Severity.WARNING and "could not be judged" in unverified.message
    summary = provenance_summary(run_reads(reads, ORIGINS, PHASES), "DIR/batches.jsonl")
    assert (summary["reads"], summary["other_content"], summary["unverified"]) == (2, 1, 1)
    assert summary["by_cache"] == {"encoder_cache": {"other_content": 1}, "kv_connector": {"unverified": 1}}


def test_a_saved_endpoint_report_keeps_its_cache_fields(tmp_path):
    from qdebug.replay.report import load_report, save_report

    report = _report()
    _judge(report, {"warm": {"req-02": [_read(CacheKind.ENCODER, CacheReuse.OTHER, f"{TAG}.req-01.warm")]}})
    report.extra.update(engine_caches_said="engine caches: …", cache_provenance={"read": True, "said": "cache provenance: …"})
    back = load_report(save_report(report, tmp_path / "r.qdr"))
    two = back.outcome("req-02")
    assert (two.verdict, two.stage, two.warm_verdict, two.cache_read) == (Verdict.CACHE_CONTAMINATED, "encoder_cache",
                                                                         Verdict.CACHE_CONTAMINATED, report.outcome("req-02").cache_read)
    assert back.extra["cache_provenance"]["said"] == "cache provenance: …" and back.extra["engine_caches_said"] == "engine caches: …"
