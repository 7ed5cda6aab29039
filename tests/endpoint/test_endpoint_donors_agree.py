"""Endpoint donors over repeats: the finding, the table, `donor`, `burst_donors` and the matrix of one run name the same donors."""

from __future__ import annotations

import re

import pytest

from .conftest import SAMPLE, load_json, qdebug_server, run_qdebug

REPEATS = 3
FINDING = re.compile(r"answered (?P<hits>\d+)/(?P<of>\d+) burst\(s\) with another request's isolated answer \((?P<parts>.*); donor: (?P<donor>\S+)\); its own is")
PART = re.compile(r"bursts? (?P<numbers>[\d, -]+): (?P<who>req-\d+(?: or req-\d+)*) \((?P<answer>'[^']*')\)")


def burst_numbers(text: str) -> list[int]:
    """"1-3, 5" → [1, 2, 3, 5]."""
    out = []
    for run in text.split(", "):
        first, _, last = run.partition("-")
        out += list(range(int(first), int(last or first) + 1))
    return out


def said_per_burst(message: str) -> tuple[int, int, dict[int, tuple[str, str]], str]:
    """(contaminated bursts, bursts, {burst: (donor as named, answer)}, the finding's donor) as the message states them."""
    m = FINDING.search(message)
    assert m, message
    named = {}
    for part in PART.finditer(m["parts"]):
        for n in burst_numbers(part["numbers"]):
            assert n not in named, message  # each burst is named once
            named[n] = (part["who"], part["answer"])
    return int(m["hits"]), int(m["of"]), named, m["donor"]


def table_cells(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The requests table's column names and the first line of each request's row."""
    columns = [c.strip() for c in next(line for line in text.splitlines() if line.startswith("┃ id")).split("┃")[1:-1]]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == len(columns) and cells[0].startswith("req-") and cells[0] not in rows:
            rows[cells[0]] = cells
    return columns, rows


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """`replay --repeat 3` of the sample capture against `qdebug serve --inject shared-visual-buffer --seed 1`: (JSON, report text)."""
    tmp = tmp_path_factory.mktemp("donors")
    server = qdebug_server(tmp, inject="shared-visual-buffer", seed=1)
    try:
        result = run_qdebug("replay", str(SAMPLE / "capture.jsonl"), "--endpoint", server.url, "--repeat", str(REPEATS), "--json", str(tmp / "r.json"))
    finally:
        server.stop()
    assert result.returncode == 1, result.stderr  # contaminated requests
    return load_json(tmp / "r.json"), result.stdout


def test_each_burst_has_its_own_donor_entry(repeated):
    doc, _ = repeated
    assert doc["repeats"] == REPEATS
    for r in doc["requests"]:
        assert len(r["burst_answers"]) == len(r["burst_verdicts"]) == len(r["burst_donors"]) == REPEATS, r
        for verdict, donors in zip(r["burst_verdicts"], r["burst_donors"]):
            assert bool(donors) == (verdict == "contaminated"), r


def test_the_finding_names_each_bursts_donor_and_a_donor_only_when_all_agree(repeated):
    doc, _ = repeated
    refs = {r["id"]: r["reference"] for r in doc["requests"]}
    agreeing = disagreeing = 0
    for r in doc["requests"]:
        found = [f for f in doc["findings"] if f["kind"] == "contamination" and f["request_id"] == r["id"]]
        if r["verdict"] != "contaminated":
            assert not found and r["donor"] is None, r
            continue
        assert len(found) == 1, found
        hits, of, named, said_donor = said_per_burst(found[0]["message"])
        contaminated = {i + 1: donors for i, donors in enumerate(r["burst_donors"]) if donors}
        assert (hits, of) == (len(contaminated), REPEATS), (r, found)  # only the contaminated bursts count
        assert {n: who for n, (who, _) in named.items()} == {n: " or ".join(d) for n, d in contaminated.items()}, (r, found)
        assert {n: answer for n, (_, answer) in named.items()} == {n: repr(r["burst_answers"][n - 1]) for n in contaminated}, (r, found)
        for n, donors in contaminated.items():  # an exact answer is every named donor's own isolated answer
            answer = r["burst_answers"][n - 1].strip()
            if answer in {t.strip() for t in refs.values()}:
                assert all(refs[d].strip() == answer for d in donors), (r, n)
        agree = len({tuple(d) for d in contaminated.values()}) == 1 and len(next(iter(contaminated.values()))) == 1
        expected = next(iter(contaminated.values()))[0] if agree else None
        assert r["donor"] == found[0]["donor"] == expected, (r, found)
        assert said_donor == (expected or "several"), (r, found)
        agreeing += agree
        disagreeing += not agree
    assert agreeing and disagreeing, [(r["id"], r["burst_donors"]) for r in doc["requests"]]


def test_the_table_and_matrix_say_what_the_json_says(repeated):
    doc, text = repeated
    columns, rows = table_cells(text)
    ids = doc["contamination"]["ids"]
    for r in doc["requests"]:
        cells = rows[r["id"]]
        assert cells[columns.index("verdict")] == r["verdict"], cells
        # bursts that name different donors: each burst's, never only the first's
        per_burst = ", ".join(f"b{k} {'/'.join(d)}" for k, d in enumerate(r["burst_donors"], start=1) if d)
        several = r["verdict"] == "contaminated" and r["donor"] is None
        donor = r["donor"] or (per_burst if several else "")
        shown = cells[columns.index("donor")]  # the cell's first line: a long list of bursts' donors folds
        assert donor.startswith(shown) and bool(shown) == bool(donor), (cells, donor)
        # The matrix row: the share of bursts in which this request answered what each column answered alone.
        row = doc["contamination"]["matrix"][ids.index(r["id"])]
        for j, d in enumerate(ids):
            times = sum(d in donors for donors in r["burst_donors"]) if d != r["id"] else r["burst_verdicts"].count("ok")
            assert row[j] == pytest.approx(times / REPEATS), (r["id"], d, row)
