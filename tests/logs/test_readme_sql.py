"""README's SQL over the Parquet (which requests were overwritten before their sync, and by whom) runs as written and
answers what the index's own contamination says."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from qdebug.analysis.log_index_build import index_logs
from tests.docs_text import documentation_text

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def test_readme_sql_finds_the_contaminated_requests(tmp_path, cache):
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", documentation_text(), re.S) if "read_parquet" in b)
    sql = re.search(r'duckdb\.sql\("""(.*?)"""\)', snippet, re.S).group(1).replace("/tmp/fleet", str(tmp_path / "fleet"))
    for host in ("a", "b"):
        index, _ = index_logs([SAMPLE], tmp_path / "fleet" / host, host=host)
        want = [(v, d) for v, d, _ in index.cells()]
        index.close()
    rows = duckdb.sql(sql).fetchall()
    assert [(h, v, d) for h, v, d, _line in rows] == [(h, v, d) for h in "ab" for v, d in want]
    assert want == [("42", "43"), ("45", "46")]
