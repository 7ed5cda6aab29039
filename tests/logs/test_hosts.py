"""Fleet use: each host indexes its own logs (`--index-only --out DIR --host NAME`), the folders are read as one; ids
are per host (shown host/id only when several hosts are read), and the findings are those of one concatenated log."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from qdebug.analysis.log_index_build import index_logs, open_log_index
from qdebug.analysis.log_report import iter_cells, iter_findings
from qdebug.cli import app
from tests.logs.log_synth import generate_log
from qdebug.replay.log_index import LogIndex

runner = CliRunner()


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Two hosts' logs with distinct request ids (host b's are prefixed b), and the two concatenated."""
    tmp = tmp_path_factory.mktemp("hosts")
    a, b, both = tmp / "a.log", tmp / "b.log", tmp / "both.log"
    generate_log(a, 60_000, seed=1)
    generate_log(b, 60_000, seed=2)
    b.write_bytes(b.read_bytes().replace(b"request_id=", b"request_id=b").replace(b"(previously ", b"(previously b"))
    both.write_bytes(a.read_bytes() + b.read_bytes())
    return a, b, both


def _strip(rid: str | None) -> str | None:
    return None if rid is None else rid.split("/", 1)[1]


def _what(index, qualified: bool) -> dict:
    """Requests, findings and cells, ids with their host/ prefix taken off when `qualified`."""
    fix = _strip if qualified else (lambda r: r)
    return {
        "requests": [(fix(rid), verdict, fix(donor), t, v) for rid, verdict, donor, t, v, _line in index.requests()],
        "findings": [(f.kind, fix(f.request_id), fix(f.donor)) for f in iter_findings(index)],
        "cells": [(fix(c["request_id"]), fix(c["donor"])) for c in iter_cells(index)],
    }


def test_two_hosts_read_together_equal_one_concatenated_log(logs, tmp_path, cache):
    a, b, both = logs
    ia, _ = index_logs([a], tmp_path / "a", host="hostA")
    ib, _ = index_logs([b], tmp_path / "b", host="hostB")
    ia.close(), ib.close()
    fleet = LogIndex.open_folders([tmp_path / "a", tmp_path / "b"])
    one, _, _ = open_log_index([both])
    assert fleet.hosts == ["hostA", "hostB"]
    got, want = _what(fleet, qualified=True), _what(one, qualified=False)
    assert want["findings"] and want["cells"]
    assert got == want
    hosts = dict(fleet.conn.execute("SELECT host, count(*) FROM events GROUP BY host ORDER BY host").fetchall())
    assert sum(hosts.values()) == one.meta["events"] and set(hosts) == {"hostA", "hostB"}
    assert all(rid.startswith(("hostA/", "hostB/")) for rid, *_ in fleet.requests(limit=50))
    # every Parquet file carries its host: SQL over a fleet's folders needs no manifest and no folder names
    import duckdb

    for name in ("events-*", "requests", "findings"):
        for host in ("a", "b"):
            stored = duckdb.sql(f"SELECT DISTINCT host FROM read_parquet('{tmp_path / host / name}.parquet')").fetchall()
            assert stored == [(f"host{host.upper()}",)], (name, stored)


def test_the_same_id_on_two_hosts_is_two_requests(tmp_path, cache):
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
    for host in ("x", "y"):
        result = runner.invoke(app, ["replay", "--index-only", str(sample), "--out", str(tmp_path / host), "--host", host])
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["replay", str(tmp_path / "x"), str(tmp_path / "y"), "--json", "-"])
    assert result.exit_code == 1, result.output  # contaminated requests found
    doc = json.loads(result.stdout)
    ids = [r["id"] for r in doc["requests"]]
    assert ids == [f"{h}/{n}" for h in "xy" for n in range(41, 49)]
    assert [(c["request_id"], c["donor"]) for c in doc["contamination"]["cells"]] == [
        ("x/42", "x/43"), ("x/45", "x/46"), ("y/42", "y/43"), ("y/45", "y/46")]


def test_one_host_reads_exactly_like_the_log(tmp_path, cache):
    """A single index folder gives the JSON the log itself gives: no host/ prefix anywhere."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
    assert runner.invoke(app, ["replay", "--index-only", str(sample), "--out", str(tmp_path / "i")]).exit_code == 0
    from_log = runner.invoke(app, ["replay", str(sample), "--json", "-"]).stdout
    from_index = runner.invoke(app, ["replay", str(tmp_path / "i"), "--json", "-"]).stdout
    assert from_index == from_log


@pytest.mark.parametrize("args, expect", [
    (["--out", "x"], "--out and --host go with --index-only"),
    (["--index-only"], "--out and --host go with --index-only"),
    (["--index-only", "--out", "o", "--host", "a/b"], "not a host name"),
])
def test_index_only_options_are_checked(tmp_path, cache, args, expect):
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
    result = runner.invoke(app, ["replay", str(sample), *args])
    assert result.exit_code == 2 and expect in result.output, result.output


def test_two_indexes_of_one_host_are_refused(tmp_path, cache):
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"
    for name in ("p", "q"):
        assert runner.invoke(app, ["replay", "--index-only", str(sample), "--out", str(tmp_path / name), "--host", "h"]).exit_code == 0
    result = runner.invoke(app, ["replay", str(tmp_path / "p"), str(tmp_path / "q")])
    assert result.exit_code != 0 and "two indexes are of host 'h'" in result.output, result.output
