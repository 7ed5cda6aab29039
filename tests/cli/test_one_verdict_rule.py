"""One verdict rule in every mode: a verdict judges what this replay observed; production's `observed` answer is its own column and finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.installed import qdebug
from tests.servers import Server, free_port

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
CAPTURE = SAMPLE / "capture.jsonl"
OBSERVED_KIND = {"contaminated": "observed_contamination", "diverged": "observed_diverged"}
CHECKPOINT = SAMPLE.parent / "qdebug" / "demo" / "checkpoint"
WAVE = 4  # replay's default --concurrency: the requests that share one buffer


def injected_truth(seed: int = 0) -> tuple[dict[str, str], set[str]]:
    """What `--inject shared-visual-buffer --seed S` must find, worked out apart from qdebug's detectors: each wave's
    seeded order of writes and reads (qdebug.schedule, as the fault draws it) played over a buffer of row owners, each
    request's row count from the demo processor's own image grid. A read wholly of one other request's rows is
    contaminated with that donor; a read of a mix (another's rows and its own, or several others') is desync."""
    from transformers import AutoProcessor

    from qdebug.replay.formats.capture import parse_capture
    from qdebug.schedule import draw_schedule

    images = AutoProcessor.from_pretrained(CHECKPOINT).image_processor
    requests = parse_capture(CAPTURE).requests
    rows = {r.request_id: int(images(images=r.request.images, return_tensors="pt")["image_grid_thw"].prod(-1).sum()) // images.merge_size**2
            for r in requests}
    ids, contaminated, desync = [r.request_id for r in requests], {}, set()
    for start in range(0, len(ids), WAVE):
        owner: list = []
        for op, rid in draw_schedule(ids[start:start + WAVE], seed * 1_000_003 + start):  # the preset's seed for a wave
            n = rows[rid]
            if op == "write":
                owner[:n] = [rid] * n
            elif set(owner[:n]) - {rid}:
                if len(set(owner[:n])) == 1:
                    contaminated[rid] = owner[0]
                else:
                    desync.add(rid)
    return contaminated, desync


def table_rows(text: str) -> dict[str, list[str]]:
    """The first line of each request's row of the requests table: id → its cells."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0].startswith("req-") and cells[0] not in rows and len(cells) > 8:
            rows[cells[0]] = cells
    return rows


def header(text: str) -> list[str]:
    """The requests table's column names (its first header line)."""
    line = next(line for line in text.splitlines() if line.startswith("┃ id"))
    return [c.strip() for c in line.split("┃")[1:-1]]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> tuple[int, dict, str]:
    """A clean local replay of the sample capture: (exit code, JSON, the report on stdout)."""
    tmp = tmp_path_factory.mktemp("local")
    code, out, err = qdebug(tmp, "replay", CAPTURE, "--device", "cpu", "--json", tmp / "r.json")
    assert (tmp / "r.json").exists(), err
    return code, json.loads((tmp / "r.json").read_text()), out


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory) -> tuple[int, dict, str]:
    """The same capture against a clean `qdebug serve` on a loopback port: (exit code, JSON, the report on stdout)."""
    tmp = tmp_path_factory.mktemp("endpoint")
    port = free_port()
    server = Server(["qdebug", "serve", "--port", str(port), "--device", "cpu", "--traces", str(tmp / "traces"), "--inject", "none"],
                    port, tmp / "serve.log").wait_ready()
    try:
        code, out, err = qdebug(tmp, "replay", CAPTURE, "--endpoint", server.url, "--concurrency", "4", "--json", tmp / "r.json")
    finally:
        server.stop()
    assert (tmp / "r.json").exists(), err
    return code, json.loads((tmp / "r.json").read_text()), out


def _assert_observed_is_its_own_story(doc: dict, table: str) -> None:
    """observed_verdict/observed_donor, the observed_* findings and the table's "observed verdict" column say the same."""
    rows, columns = table_rows(table), header(table)
    says, verdict, donor = columns.index("observed verdict"), columns.index("verdict"), columns.index("donor")
    for r in doc["requests"]:
        found = [f for f in doc["findings"] if f["request_id"] == r["id"] and f["kind"].startswith("observed_")]
        if r["observed"] is None:
            assert r["observed_verdict"] is None and not found, r
        elif r["observed_verdict"] == "ok":
            assert r["observed"].strip() == r["reference"].strip() and not found, r
        else:
            assert [f["kind"] for f in found] == [OBSERVED_KIND[r["observed_verdict"]]], (r, found)
            assert found[0]["donor"] == r["observed_donor"], (r, found)
        assert (r["observed_donor"] is not None) == (r["observed_verdict"] == "contaminated"), r
        cells = rows[r["id"]]
        assert cells[says] == ("–" if r["observed_verdict"] is None else " ".join(filter(None, (r["observed_verdict"], r["observed_donor"])))), cells
        assert cells[verdict] == r["verdict"] and cells[donor] == (r["donor"] or ""), cells


def test_a_clean_local_replay_is_ok_and_exits_0_with_productions_findings_beside_it(local):
    code, doc, table = local
    assert code == 0, table
    for r in doc["requests"]:
        assert r["replayed"] == r["reference"], r  # nothing wrong in this replay ...
        assert r["verdict"] == "ok" and r["donor"] is None, r  # ... so nothing wrong in its verdicts
    req05 = next(r for r in doc["requests"] if r["id"] == "req-05")
    assert (req05["observed_verdict"], req05["observed_donor"]) == ("contaminated", "req-08")  # production's story, kept
    assert {f["kind"] for f in doc["findings"]} >= {"observed_contamination", "observed_diverged"}
    _assert_observed_is_its_own_story(doc, table)


def test_an_endpoint_replay_of_the_same_capture_follows_the_same_rule(local, endpoint):
    _, local_doc, _ = local
    code, doc, table = endpoint
    assert code == 0, table
    by_id = {r["id"]: r for r in local_doc["requests"]}
    for r in doc["requests"]:
        assert r["reference"] == by_id[r["id"]]["reference"], r  # the same model answers alike in both modes
        assert r["verdict"] == by_id[r["id"]]["verdict"] == "ok", r
        assert (r["observed_verdict"], r["observed_donor"]) == (by_id[r["id"]]["observed_verdict"], by_id[r["id"]]["observed_donor"]), r
    local_observed = sorted((f["kind"], f["request_id"], f["donor"]) for f in local_doc["findings"] if f["kind"].startswith("observed_"))
    assert sorted((f["kind"], f["request_id"], f["donor"]) for f in doc["findings"] if f["kind"].startswith("observed_")) == local_observed
    _assert_observed_is_its_own_story(doc, table)


def test_the_injected_replay_keeps_its_contaminated_requests_and_donors(tmp_path):
    code, out, err = qdebug(tmp_path, "replay", CAPTURE, "--device", "cpu", "--inject", "shared-visual-buffer", "--seed", "0", "--json", "-")
    assert code == 1, err
    doc = json.loads(out)
    contaminated, desync = injected_truth(seed=0)
    assert len(contaminated) == 4 and len(desync) == 4  # the seed mixes rows in both ways
    assert {r["id"]: r["donor"] for r in doc["requests"] if r["verdict"] == "contaminated"} == contaminated
    assert {r["id"] for r in doc["requests"] if r["verdict"] == "desync"} == desync
    for r in doc["requests"]:  # every contaminated verdict rests on this replay's rows, never on production's answer
        if r["verdict"] == "contaminated":
            assert any(f["kind"] == "contamination" and f["request_id"] == r["id"] and f["donor"] == r["donor"] for f in doc["findings"]), r
    # req-11: this replay put req-09's rows in its stream; production answered what req-08, req-09 and req-14 all answer
    # alone, and of those alike the observed donor is the one whose rows this replay measured (commit 7e52c17).
    req11 = next(r for r in doc["requests"] if r["id"] == "req-11")
    assert (req11["donor"], req11["observed_verdict"], req11["observed_donor"]) == (contaminated["req-11"], "contaminated", "req-09")
    _assert_observed_is_its_own_story(doc, err)
