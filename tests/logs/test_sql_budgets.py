"""The verdict SQL runs under a memory bound; when DuckDB runs out under one, the next (larger) budget finishes the
index, and the index is the same as the reference's."""

from __future__ import annotations

from qdebug.analysis.log_index_build import build_index
from qdebug.replay import log_sql
from tests.logs.log_synth import generate_log

from .reference_index import index_tables, reference_tables


def test_a_budget_that_runs_out_falls_back_to_the_next(tmp_path, monkeypatch):
    log = tmp_path / "svc.log"
    generate_log(log, 30_000, seed=5)
    tried, derive = [], log_sql._derive

    def spy(*args):
        memory_mb = args[-2]
        try:
            derive(*args)
        except Exception as exc:
            tried.append((memory_mb, type(exc).__name__))
            raise
        tried.append((memory_mb, "ok"))

    monkeypatch.setattr(log_sql, "_BUDGETS", ((1, 1), (256, 1)))  # 1 MB: DuckDB runs out on the first statement
    monkeypatch.setattr(log_sql, "_derive", spy)
    index, interrupted = build_index([log], tmp_path / "idx")
    assert tried == [(1, "OutOfMemoryException"), (256, "ok")]
    assert not interrupted and index_tables(index) == reference_tables(log)
    index.close()
    assert sorted(p.name for p in (tmp_path / "idx").iterdir() if p.name.startswith(".")) == []  # nothing of the failed try left


def test_a_log_with_more_mentions_than_one_sort_holds_is_counted_in_slices(tmp_path, monkeypatch):
    log = tmp_path / "svc.log"
    generate_log(log, 30_000, seed=6)
    slices = []
    register = log_sql._register_shared

    def spy(con, partials, raw, over):
        register(con, partials, raw, over)
        slices.append(con.execute("SELECT count(*) FROM shared").fetchone()[0])

    monkeypatch.setattr(log_sql, "_HASHES_AT_ONCE", 997)  # a few thousand mentions: several slices of the hash space
    monkeypatch.setattr(log_sql, "_register_shared", spy)
    index, interrupted = build_index([log], tmp_path / "idx")
    assert slices and slices[0] > 0  # some ids were shared (so the slices were merged into one table)
    assert not interrupted and index_tables(index) == reference_tables(log)
    index.close()
