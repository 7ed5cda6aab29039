"""The progress bar's rate: lines per second and the share of the disk's read rate (from the scan's own reads)."""

from __future__ import annotations

from qdebug.commands.log_replay import rate_text
from qdebug.replay.formats.log_scan import ScanStats, scan_files
from tests.logs.log_synth import generate_log


def test_rate_text_says_lines_per_second_and_the_disk_share():
    assert rate_text(1_900_000, 100 << 20, 1.0, 0.62) == "1.9 M lines/s · 62% of disk read rate"
    assert rate_text(0, 0, 0.0, 0.0) == ""
    assert rate_text(500_000, 1, 1.0, 0.0) == "0.5 M lines/s"


def test_the_scan_times_its_raw_reads(tmp_path):
    log = tmp_path / "svc.log"
    generate_log(log, 20_000, seed=1)
    seen = []
    stats = scan_files([log], lambda table: None, lambda done, total, lines: seen.append((done, total, lines)), ScanStats(), as_tables=True)
    assert stats.read_seconds > 0 and stats.bytes_read == log.stat().st_size
    assert seen[-1] == (log.stat().st_size, log.stat().st_size, seen[-1][2])
