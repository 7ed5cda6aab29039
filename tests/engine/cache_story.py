"""What a `replay --endpoint --engine-traces` report says about the server's caches, checked against evidence the test
holds itself: the images it sent (their pixels), and the plugin's batch log read line by line with `json` (never the
report's own findings). And the report's one story: counts, table, findings, JSON, exit code, and the saved report
reopened in the TUI's batch screen."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from tests.endpoint.test_endpoint_donors_agree import table_cells

REPO = Path(__file__).resolve().parents[2]
PIPELINE = ["processor_cache", "encoder_cache", "prefix_cache", "kv_connector"]  # the order a request meets the caches
PHASES = ("reference", "burst-1", "warm")  # the documented command's phases (one burst, then the warm phase)
PROMPT = "Describe the image."


@dataclass
class Sent:
    """One request of a capture: its image and the text before it (a shared prefix, or "")."""

    image: Image.Image
    prefix: str = ""


def data_url(image: Image.Image) -> str:
    raw = io.BytesIO()
    image.save(raw, format="PNG")
    return "data:image/png;base64," + base64.b64encode(raw.getvalue()).decode()


def write_capture(path: Path, sent: dict[str, Sent]) -> Path:
    """A capture (JSONL of chat-completions bodies) of these requests, in order, few tokens each."""
    lines = []
    for rid, s in sent.items():
        parts = ([{"type": "text", "text": s.prefix}] if s.prefix else []) + [
            {"type": "image_url", "image_url": {"url": data_url(s.image)}}, {"type": "text", "text": PROMPT}]
        lines.append({"id": rid, "max_tokens": 6, "messages": [{"role": "user", "content": parts}]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def replay(server, capture: Path, out: Path) -> tuple[dict, subprocess.CompletedProcess]:
    """The documented command with its defaults (`qdebug replay CAPTURE --endpoint URL --engine-traces DIR --model demo`),
    run as this checkout's `python -m qdebug`, with its JSON and its saved report beside `out`."""
    cmd = [sys.executable, "-m", "qdebug", "replay", str(capture), "--endpoint", server.url, "--engine-traces", str(server.traces),
           "--model", "demo", "--device", "cpu", "--json", str(out), "--save", str(out.with_suffix(".qdr"))]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO, env={**os.environ, "COLUMNS": "420"})
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text()), result


@dataclass(frozen=True)
class LoggedRead:
    """One cache read as the plugin's batch log holds it, with the reader and donor as the capture names them."""

    reader: str
    phase: str
    donor: str | None  # None: no request of this replay computed it
    donor_phase: str | None
    doc: dict

    @property
    def cache(self) -> str:
        return self.doc["cache"]


def logged_reads(folder: Path, tag: str, ids: list[str]) -> list[LoggedRead]:
    """Every cache read of this replay's requests in the plugin's batch log (`cache_reads` lines), read with json."""
    names = {f"{tag}.{rid}.{phase}": (rid, phase) for rid in ids for phase in PHASES}
    out = []
    for path in (folder / "batches.1.jsonl", folder / "batches.jsonl"):
        for line in path.read_text().splitlines() if path.exists() else []:
            rec = json.loads(line)
            if rec["record"] != "cache_reads" or rec["request"] not in names:
                continue
            rid, phase = names[rec["request"]]
            for doc in rec["reads"]:
                donor, donor_phase = names.get(doc["origin_name"], (None, None))
                out.append(LoggedRead(rid, phase, donor, donor_phase, doc))
    return out


def served_other_content(read: LoggedRead, sent: dict[str, Sent]) -> bool:
    """Whether what was served was computed from other content than the reader's, by what the test sent: the image's
    pixels where the read covers the image (its placeholders), else the text before it."""
    assert read.donor is not None, f"a read from outside this replay: {read.doc}"
    mine, theirs = sent[read.reader], sent[read.donor]
    if read.doc["media"]:
        return mine.image.tobytes() != theirs.image.tobytes()
    return mine.prefix != theirs.prefix


def flat(text: str) -> str:
    """Terminal text with box borders and wrapping taken out."""
    return " ".join(text.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def cache_lines(doc: dict) -> list[str]:
    """The lines the findings list shows for the JSON's cache findings: each error and warning as it is, the info ones of
    a kind folded into one line naming their requests (render.findings.listed, the rule both the CLI and the TUI follow)."""
    from qdebug.findings import Finding
    from qdebug.render.findings import listed

    return [f.message for f in listed([Finding(**f) for f in doc["findings"]]) if f.kind.split(" ")[0] in ("cache_read", "warm_run")]


def assert_one_cache_story(doc: dict, result: subprocess.CompletedProcess, saved: Path) -> None:
    """Counts, table, findings, JSON, exit code and the TUI's batch screen on the saved report agree."""
    verdicts = Counter(r["verdict"] for r in doc["requests"])
    assert doc["counts"]["requests"] == dict(verdicts), (doc["counts"], verdicts)
    assert doc["counts"]["requests_cache_contaminated"] == verdicts["cache_contaminated"]
    runs = [v for r in doc["requests"] for v in r["burst_verdicts"]]
    assert doc["counts"]["cache_contaminated"] == runs.count("cache_contaminated")
    warm = [r["warm_verdict"] for r in doc["requests"]]
    assert doc["counts"]["warm"]["cache_contaminated"] == warm.count("cache_contaminated")
    assert result.returncode == (0 if set(verdicts) == {"ok"} else 1), result.stderr[-2000:]
    text = flat(result.stdout)
    for said in (doc["engine_caches_said"], doc["cache_provenance"]["said"]):  # the report says what each phase did
        assert flat(said) in text, said
    columns, rows = table_cells(result.stdout)
    for r in doc["requests"]:  # the table's verdict with its stage, its donor and the reused range, as the JSON's
        cells = dict(zip(columns, rows[r["id"]]))
        assert cells["verdict"] == r["verdict"] + (f" @{r['stage']}" if r["stage"] else ""), (cells, r)
        assert (cells["donor"] or None) == r["donor"], (cells, r)
        if r["cache_read"]:
            assert cells["reused"] == r["cache_read"]["what"], (cells, r)
    for said in cache_lines(doc):  # every cache finding in the terminal report, as in the JSON (alike info ones folded)
        assert flat(said) in text, said
    # the TUI's batch screen on the saved report: the same verdicts, donors, cache lines and findings
    from qdebug.replay.report import load_report
    from qdebug.tui.app import build_app
    from qdebug.tui.widgets.request_table import RequestTable

    report = load_report(saved)

    async def drive() -> tuple[dict, str, str]:
        app = build_app(report=report)
        async with app.run_test(size=(220, 60)) as pilot:
            await pilot.pause()
            table = app.screen.query_one(RequestTable)
            shown = {str(table.get_row(k)[0]): [str(c) for c in table.get_row(k)] for k in table.rows}
            caches = str(app.screen.query_one("#caches").render())
            findings = str(app.screen.query_one("#findings").render())
            await pilot.press("q")
            return shown, caches, findings

    shown, caches, findings = asyncio.run(drive())
    for r in doc["requests"]:
        assert shown[r["id"]][1].split(" ")[0] == r["verdict"] and (shown[r["id"]][2] if shown[r["id"]][2] != "–" else None) == r["donor"], shown[r["id"]]
    assert flat(doc["engine_caches_said"]) in flat(caches) and flat(doc["cache_provenance"]["said"]) in flat(caches)
    for said in cache_lines(doc):
        assert flat(said) in flat(findings), said
