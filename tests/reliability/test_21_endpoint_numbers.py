"""Issue 49 item 13: numbers from a server are read defensively. A `top_logprobs` logprob that is a 401-digit integer
(valid JSON, no float holds it) raised OverflowError and no JSON was written; it is now a per-request finding, the
answer kept, the report written."""

from __future__ import annotations

import pytest

from .conftest import qdebug
from .hostile import hostile_server, small_capture, strict_json


def test_a_401_digit_logprob_is_a_finding_and_the_json_is_written(tmp_path):
    capture = small_capture(tmp_path)
    server = hostile_server(tmp_path, "bigint")
    try:
        out = tmp_path / "r.json"
        proc = qdebug("replay", capture, "--endpoint", server.url, "--repeat", "1", "--json", out, timeout=120)
    finally:
        server.stop()
    assert "Traceback" not in proc.stderr and "OverflowError" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr  # every answer the same: nothing found but the server's bad number
    doc = strict_json(out.read_text())
    assert all(r["verdict"] == "ok" and r["replayed"] == "a red circle" for r in doc["requests"]), doc["requests"]
    bad = [f for f in doc["findings"] if f["kind"] == "nan_inf"]
    assert bad and "(401 digits)" in bad[0]["message"] and "written as null" in bad[0]["message"], doc["findings"]


@pytest.mark.parametrize("value", [10 ** 400, -(10 ** 400), float("nan"), float("inf"), True, "-0.5", None, [1.0], {"v": 1}])
def test_only_finite_numbers_are_numbers(value):
    from qdebug.replay.endpoint import finite_number

    assert finite_number(value) is None


@pytest.mark.parametrize("value", [-0.5, 0, -3, -1e-300, 2 ** 63])
def test_finite_numbers_are_read_as_floats(value):
    from qdebug.replay.endpoint import finite_number

    assert finite_number(value) == float(value)


def test_an_answer_keeps_its_good_logprobs_and_names_the_bad_ones():
    from qdebug.replay.endpoint import _parse_answer

    doc = {"choices": [{"message": {"content": "a"}, "logprobs": {"content": [{"token": "a", "logprob": 0.0, "top_logprobs": [
        {"token": "a", "logprob": -0.1}, {"token": "b", "logprob": 10 ** 400}, {"token": "c", "logprob": "x"}, {"token": 7, "logprob": -2}]}]}}]}
    answer = _parse_answer(doc)
    assert answer.text == "a" and answer.first_top == {"a": -0.1, "7": -2.0}
    assert len(answer.bad_logprobs) == 2 and "(401 digits)" in answer.bad_logprobs[0] and "'x'" in answer.bad_logprobs[1]
