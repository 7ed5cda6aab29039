"""One verdict ranking: the replay judge, the log findings and the log index's stored codes agree on it."""

from qdebug.analysis.verdicts import RequestEvidence, judge_request, settle_by_text, worst
from qdebug.replay.log_codes import CODE_OF_VERDICT, VERDICT_OF_CODE
from qdebug.vocab import VERDICT_RANK, Verdict


def test_every_verdict_has_a_rank_and_the_worse_wins():
    assert set(VERDICT_RANK) == set(Verdict)
    assert worst(Verdict.OK, Verdict.DESYNC, Verdict.ERROR) == Verdict.DESYNC
    assert worst(Verdict.CONTAMINATED, Verdict.DESYNC) == Verdict.CONTAMINATED
    assert worst(Verdict.OK) == Verdict.OK


def test_log_index_codes_on_disk_are_unchanged():
    assert VERDICT_OF_CODE == (Verdict.OK, Verdict.ERROR, Verdict.DESYNC, Verdict.CONTAMINATED)
    assert [CODE_OF_VERDICT[v] for v in VERDICT_OF_CODE] == [0, 1, 2, 3]


def test_texts_move_only_ok_or_diverged():
    assert settle_by_text(Verdict.OK, Verdict.DIVERGED) == Verdict.DIVERGED
    assert settle_by_text(Verdict.DIVERGED, Verdict.CONTAMINATED) == Verdict.CONTAMINATED
    assert settle_by_text(Verdict.DESYNC, Verdict.CONTAMINATED) == Verdict.DESYNC
    assert settle_by_text(Verdict.ERROR, Verdict.CONTAMINATED) == Verdict.ERROR


def test_judge_request_stream_first_then_its_own_answer():
    judge = lambda **kw: judge_request(RequestEvidence(**kw))  # noqa: E731
    assert judge() == Verdict.OK
    assert judge(donor="b", damaged=True, diverged=True) == Verdict.CONTAMINATED
    assert judge(damaged=True, diverged=True) == Verdict.DESYNC
    assert judge(diverged=True) == Verdict.DIVERGED


def test_what_production_answered_is_no_evidence_for_the_verdict():
    # One rule in every mode: the verdict judges this replay; production's `observed` answer is judged beside it.
    assert "observed" not in RequestEvidence.__dataclass_fields__


def test_a_burst_verdict_is_the_worst_answered_one_by_the_shared_ranking():
    from qdebug.analysis.verdicts import burst_verdict
    from qdebug.vocab import Verdict

    ok, div, err, con = Verdict.OK, Verdict.DIVERGED, Verdict.ERROR, Verdict.CONTAMINATED
    assert burst_verdict([ok, div, con]) == con and burst_verdict([ok, div]) == div and burst_verdict([ok, ok]) == ok
    assert burst_verdict([err, ok]) == ok  # a failed burst request hides nothing the answered ones showed
    assert burst_verdict([err, div]) == div and burst_verdict([err, err]) == err and burst_verdict([]) == ok


# The documented order, least to worst: ARCHITECTURE.md ("one ranking, vocab.VERDICT_RANK"), docs/vllm.md (a request's
# verdict is the worst of its runs'), vocab.py (cache_contaminated: above batch_dependent, below desync).
ORDER = (Verdict.OK, Verdict.DIVERGED, Verdict.ERROR, Verdict.SERVER_MISMATCH, Verdict.BATCH_DEPENDENT, Verdict.CACHE_CONTAMINATED,
         Verdict.DESYNC, Verdict.CONTAMINATED)


def test_the_ranking_is_the_documented_order():
    assert set(ORDER) == set(Verdict) and len(ORDER) == len(Verdict)
    assert sorted(Verdict, key=VERDICT_RANK.__getitem__) == list(ORDER)
    assert len(set(VERDICT_RANK.values())) == len(VERDICT_RANK)  # no two verdicts tie


def test_worst_of_every_pair_is_the_later_in_the_order_either_way_round():
    for i, better in enumerate(ORDER):
        for worse in ORDER[i + 1:]:
            assert worst(better, worse) == worse and worst(worse, better) == worse, (better, worse)
            assert worst(better, worse, better) == worse
        assert worst(better, better) == better


def test_a_burst_verdict_is_the_worst_answered_for_every_pair():
    from qdebug.analysis.verdicts import burst_verdict

    answered = [v for v in ORDER if v != Verdict.ERROR]
    for i, better in enumerate(answered):
        for worse in answered[i + 1:]:
            assert burst_verdict([better, Verdict.ERROR, worse]) == worse and burst_verdict([worse, better]) == worse, (better, worse)


def test_texts_move_only_ok_or_diverged_for_every_pair():
    for current in ORDER:
        for by_text in ORDER:
            moved = settle_by_text(current, by_text)
            if current in (Verdict.OK, Verdict.DIVERGED):
                assert moved == worst(current, by_text), (current, by_text)
            else:
                assert moved == current, (current, by_text)
