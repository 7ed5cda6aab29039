"""The batch screen gives columns the width they need: answers whole where they fit, every matrix column shown."""

from __future__ import annotations

import re

import pytest

from qdebug.replay.report import ReplayReport, RequestOutcome
from qdebug.tui.app import build_app
from qdebug.tui.widgets.contamination_view import ContaminationView
from qdebug.tui.widgets.request_table import RequestTable, fit_widths
from qdebug.vocab import Verdict

from .conftest import text_of

SHAPES = ("circle", "square", "triangle")
N = 14


def _burst() -> ReplayReport:
    """14 requests whose answers differ only after 10 characters (cut at 30 they would read alike), and their matrix."""
    ids = [f"req-{i:02d}" for i in range(N)]
    requests = []
    for i, rid in enumerate(ids):
        reference = f"a yellow {SHAPES[i % 3]} in the bottom left"
        donor = ids[i - 1] if i % 4 == 3 else None
        replayed = f"a yellow {SHAPES[(i - 1) % 3]} in the bottom left" if donor else reference
        requests.append(RequestOutcome(id=rid, image=f"sample_data/yellow_{SHAPES[i % 3]}_bottom_left.png", reference=reference,
                                       replayed=replayed, verdict=Verdict.CONTAMINATED if donor else Verdict.OK, donor=donor))
    matrix = [[1.0 if i == j else round(0.1 + 0.05 * ((i * 7 + j * 3) % 13), 2) for j in range(N)] for i in range(N)]
    return ReplayReport(source="burst14.qdr", kind="capture", requests=requests, contamination_ids=ids, contamination=matrix)


def test_fit_widths_keeps_short_columns_whole_and_shares_the_rest():
    assert fit_widths([29, 70, 70], 200) == [29, 70, 70]
    assert fit_widths([29, 70, 70], 120) == [29, 45, 46]
    assert min(fit_widths([29, 70, 70], 20)) == 12  # never narrower than the floor (the table scrolls then)


@pytest.mark.parametrize("width", [160, 200])
async def test_answers_show_whole_and_the_matrix_keeps_every_column(width):
    report = _burst()
    app = build_app(report=report)
    async with app.run_test(size=(width, 50)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(RequestTable)
        for r in report.requests:
            row = [str(c) for c in table.get_row(r.id)]
            assert row[6] == repr(r.reference) and row[7] == repr(r.replayed)  # whole: where captions differ shows
        assert table.virtual_size.width <= table.size.width  # …and the table fits the screen (no hidden columns)
        matrix = text_of(app.screen.query_one(ContaminationView))
    _assert_every_column(matrix, report)


async def test_a_narrow_screen_cuts_answers_evenly_and_still_shows_every_matrix_column():
    report = _burst()
    app = build_app(report=report)
    async with app.run_test(size=(100, 50)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(RequestTable)
        row = [str(c) for c in table.get_row("req-03")]
        assert row[6].endswith("…") and row[7].endswith("…")
        assert len(row[6]) == len(row[7]) or abs(len(row[6]) - len(row[7])) <= 1  # the two texts share the room
        assert row[6][:-1] in repr(report.requests[3].reference)
        assert table.virtual_size.width <= table.size.width
        matrix = text_of(app.screen.query_one(ContaminationView))
    _assert_every_column(matrix, report)


def _assert_every_column(matrix: str, report: ReplayReport) -> None:
    """Every column number appears in a header, and row 1's values all appear in order across the blocks."""
    lines = matrix.splitlines()
    headers = [line for line in lines if re.fullmatch(r"\s*(\d+\s+)*\d+\s*", line)]
    numbers = [int(n) for line in headers for n in line.split()]
    assert numbers == list(range(1, N + 1)), matrix
    first_row = [line for line in lines if re.match(r"\s*1 \S+ ", line)]
    values = [v for line in first_row for v in line.split()[2:]]
    expected = ["1.0" if v >= 0.9995 else f"{v:.2f}".lstrip("0") for v in report.contamination[0]]
    assert values == expected, matrix
    assert "…" not in "".join(headers) and all(not line.endswith("…") for line in lines), matrix
