"""What every `replay --endpoint --engine-traces` report must hold whatever the server did: one story told by its counts,
its table, its findings, its JSON and its exit code; and the burst records of the plugin, read independently."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tests.endpoint.conftest import SAMPLE, run_qdebug
from tests.endpoint.test_endpoint_donors_agree import table_cells


def replay(server, out: Path, *args: str) -> tuple[dict, object]:
    """The sample capture replayed against `server` with its engine traces, 14 at a time: (JSON, the finished command)."""
    result = run_qdebug("replay", str(SAMPLE / "capture.jsonl"), "--endpoint", server.url, "--concurrency", "14",
                        "--engine-traces", str(server.traces), "--json", str(out), *args, env={"COLUMNS": "320"}, timeout=900)
    assert out.exists(), result.stdout + result.stderr
    return json.loads(out.read_text()), result


def assert_one_story(doc: dict, result) -> None:
    """Counts equal the table's verdicts and the JSON's, the exit code follows them, and the report says what it read."""
    verdicts = Counter(r["verdict"] for r in doc["requests"])
    assert doc["counts"]["requests"] == dict(verdicts), (doc["counts"], verdicts)
    runs = [v for r in doc["requests"] for v in r["burst_verdicts"]]
    assert doc["counts"]["contaminated"] == runs.count("contaminated") and doc["counts"]["burst_answers"] == len(runs)
    assert doc["counts"]["requests_contaminated"] == verdicts["contaminated"]
    columns, rows = table_cells(result.stdout)
    for r in doc["requests"]:  # the table's verdict (with its stage) and the JSON's
        cell = rows[r["id"]][columns.index("verdict")]
        assert cell.split(" ")[0] == r["verdict"] and (r["stage"] is None or f"@{r['stage']}" in cell), (cell, r)
    kinds = {}
    for f in doc["findings"]:
        kinds.setdefault(f["request_id"], set()).add(f["kind"])
    assert not [rid for rid, k in kinds.items() if {"nondeterminism", "engine_contamination"} <= k], kinds
    assert result.returncode == (1 if set(verdicts) != {"ok"} else 0), result.stderr
    assert "engine traces: read" in result.stdout and doc["engine_traces"]["read"] == doc["engine_traces"]["expected"] > 0
    # the answers matrix is named for what it holds, never as the cosine matrix of encoder rows
    assert "encoder rows (column), cosine" not in result.stdout and "stream \\ rows of" not in result.stdout
    assert "answers: share of bursts" in result.stdout and "request \\ answer of" in result.stdout
    for k, b in enumerate(doc["engine_traces"]["batching"], start=1):  # each burst's batching is said, a burst that never batched warned
        said = [f for f in doc["findings"] if f["message"].startswith(f"burst {k}")
                and f["kind"] == ("engine_batching" if b["batched"] else "burst_not_batched")]
        assert said and b["said"] in said[0]["message"], (b, doc["findings"])


def records(folder: Path, tag: str, phase: str) -> tuple[list[list[str]], list[list[str]]]:
    """The plugin's encoder calls and steps of one run's phase (`burst-1`), as lists of the capture's request ids, read
    straight from batches.jsonl (names `<tag>.<request id>.<phase>`)."""
    calls, steps = [], []
    for path in (folder / "batches.1.jsonl", folder / "batches.jsonl"):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            ids = lambda names: [n[len(tag) + 1:-len(phase) - 1] for n in names if n.startswith(f"{tag}.") and n.endswith(f".{phase}")]  # noqa: E731
            if rec["record"] == "encoder_call":
                calls.append(ids(n for n, _ in rec["items"]))
            else:
                steps.append(ids(rec["prefill"] + rec["decode"]))
    return [c for c in calls if c], [s for s in steps if s]
