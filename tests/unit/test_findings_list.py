"""The findings list every report shows: what went wrong first, and alike info findings (vLLM's detokenisation of every
clean answer) folded into one line with their count, so fourteen notes never bury the one error."""

from __future__ import annotations

import io

from rich.console import Console

from qdebug.analysis.endpoint import whitespace_finding
from qdebug.findings import Finding
from qdebug.render.findings import findings_panel
from qdebug.vocab import FindingKind, Severity


def _printed(findings) -> list[str]:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(findings_panel(findings))
    return [line.strip("│ ") for line in console.file.getvalue().splitlines()[1:-1]]


def test_fourteen_detokenization_notes_are_one_line_with_their_count_below_the_error():
    notes = [whitespace_finding(f" a red circle {i}", f"a red circle {i}", f"req-{i:02d}") for i in range(14)]
    error = Finding(FindingKind.SERVER_MISMATCH, Severity.ERROR, "request req-07: the server answers 'x' even alone", request_id="req-07")
    warning = Finding(FindingKind.NONDETERMINISM, Severity.WARNING, "request req-02: 1/3 burst answer(s) differ", request_id="req-02")
    lines = _printed([*notes[:7], warning, *notes[7:], error])
    assert lines[0].startswith("[error] server_mismatch: request req-07") and lines[1].startswith("[warning] nondeterminism")
    assert len(lines) == 3, lines
    assert lines[2].startswith("[info] detokenization ×14: requests req-00, req-01, req-02, … 11 more: ")
    assert "differ only in surrounding whitespace" in lines[2]


def test_a_single_info_finding_keeps_its_own_words():
    lines = _printed([whitespace_finding(" a cat", "a cat", "req-01")])
    assert len(lines) == 1 and lines[0].startswith("[info] detokenization: request req-01: the server's answer ' a cat'"), lines


def test_info_findings_of_one_kind_that_say_different_things_each_keep_their_line():
    """Each burst's batching, each request's cache reads: folding them under the first one's words would tell every
    request's story as the first's (the count and the request list beside someone else's message)."""
    said = [Finding(FindingKind.ENGINE_BATCHING, Severity.INFO, f"burst {k}: req-0{k} shared its encoder call with req-09", request_id=f"req-0{k}")
            for k in (1, 2, 3)]
    same = [Finding(FindingKind.ENGINE_BATCHING, Severity.INFO, f"request req-1{k}: ran alone in every step", request_id=f"req-1{k}") for k in (1, 2)]
    lines = _printed([*said, *same])
    assert lines[:3] == [f"[info] engine_batching: burst {k}: req-0{k} shared its encoder call with req-09" for k in (1, 2, 3)], lines
    assert lines[3:] == ["[info] engine_batching ×2: requests req-11, req-12: ran alone in every step"], lines
