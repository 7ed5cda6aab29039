"""The verdict SQL merges the native pass's per-chunk partials (log_partials) into exactly the requests, contaminations
and findings the events alone give (the reference): random logs of a few request ids, interleaved, over many small
chunks, with overwrites between them, lines the reference must judge, and impossible dates."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdebug.analysis.log_index_build import build_index
from qdebug.replay.formats import log_scan
from qdebug.replay.log_parquet import FINDINGS

from .reference_index import index_tables, reference_tables
from .test_scan_block_matches_lines import line

RIDS = ["1", "2", "3", "req-7"]
STAMP = "2024-07-12T14:23:0{s}.{f}Z"
EVENTS = [
    "DEBUG VisualEncoder::encode_image: request_id={a} start",
    "DEBUG VisualEncoder::write_buffer: request_id={a} wrote 256 tokens at offset {n}",
    "DEBUG TokenSynchronizer::stitch: request_id={a} consumed 256 tokens at offset {n}",
    "DEBUG Generator::decode: request_id={a} first_token",
    "DEBUG VisualEncoder::write_buffer: request_id={a} overwrote buffer at offset {n} (previously {b})",
    "WARN TokenStreamDesyncWarning: visual token offset {n} differs from textual offset 0 (request_id={a})",
    "ERROR CrossAttentionIndexOutOfBounds: token index {n} exceeds sequence length 9 (request_id={a})",
    # the reference's to judge: a shape the column-wise passes do not take, and an impossible date
    "DEBUG VisualEncoder::write_buffer: request_id={a} consumed 256 tokens at offset {n}",
]
event = st.builds(
    lambda body, a, b, n, s, f: STAMP.format(s=s, f=f) + " " + body.format(a=a, b=b, n=n),
    st.sampled_from(EVENTS), st.sampled_from(RIDS), st.sampled_from(RIDS), st.sampled_from(["0", "256", "512"]),
    st.integers(0, 9), st.sampled_from(["1", "25", "999"]),
)
impossible = st.sampled_from(RIDS).map(lambda a: f"2024-02-30T14:23:07.1Z DEBUG Generator::decode: request_id={a} first_token")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(event, event, event, line, impossible), min_size=1, max_size=80), st.integers(200, 3000))
def test_partials_merge_into_the_reference(recogniser, sample, chunk):
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(log_scan, "CHUNK_BYTES", chunk)  # a request's lines in many chunks, each folded apart
        path = Path(tmp) / "x.log"
        path.write_bytes(("\n".join(sample) + "\n").encode("utf-8"))
        index, _ = build_index([path], Path(tmp) / "idx")
        try:
            assert index_tables(index) == reference_tables(path)
        finally:
            index.close()
        assert sorted(p.name for p in (Path(tmp) / "idx").iterdir() if p.name.startswith(".")) == []  # summaries removed
        seqs = pq.read_table(Path(tmp) / "idx" / FINDINGS, columns=["seq"]).column(0).to_pylist()
        assert seqs == sorted(seqs)  # written in seq order (not sorted in memory): a reader's page skips row groups


def test_rows_the_reference_judged_shift_the_folded_rows_after_them(tmp_path, recogniser):
    """A sync the reference recognised (a shape the passes leave to it) comes before request 1's folded rows in the same
    chunk: their seqs count it, so request 1's last sync and last write are its own rows' seqs, not one less."""
    lines = ["2024-07-12T14:23:07.1Z DEBUG stitch request_id=2 consumed 256 tokens at offset 0",
             "2024-07-12T14:23:07.2Z DEBUG VisualEncoder::write_buffer: request_id=1 wrote 256 tokens at offset 512",
             "2024-07-12T14:23:07.3Z DEBUG TokenSynchronizer::stitch: request_id=1 consumed 256 tokens at offset 512",
             "2024-07-12T14:23:07.4Z DEBUG VisualEncoder::write_buffer: request_id=2 overwrote buffer at offset 512 (previously 1)"]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    index, _ = build_index([path], tmp_path / "idx")
    got, want = index_tables(index), reference_tables(path)
    index.close()
    assert got == want
    assert [(r[1], r[9]) for r in got["requests"]] == [("2", 0), ("1", 2)]  # rid, last sync's seq
