"""ReplayReport: the outcome of a replayed burst or a parsed runtime log, and its `.qdr` file (zip, no pickle)."""

from __future__ import annotations

import tempfile
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path

from qdebug import strict_json
from qdebug.atomic import atomic_path
from qdebug.errors import TraceFormatError
from qdebug.findings import Finding
from qdebug.vocab import Verdict

from .batch import Event

REPORT_FORMAT = "qdebug-replay"
REPORT_VERSION = 1
# A dense contamination matrix is written only for replayed captures up to this many requests.
MATRIX_MAX_REQUESTS = 256


@dataclass
class RequestOutcome:
    """One request of a burst: what it should have said, what it said, and the verdict."""

    id: str
    image: str | None = None
    reference: str | None = None  # isolated run's text (None for a runtime log)
    replayed: str | None = None  # text under the replay mode / fault
    observed: str | None = None  # text the production service returned (captures)
    verdict: Verdict = Verdict.OK
    donor: str | None = None
    text_offset: int | None = None
    visual_offset: int | None = None
    error: str | None = None
    line: int | None = None
    first_token_kl: float | None = None
    first_token_topk_overlap: float | None = None
    images: list = field(default_factory=list)  # per image: index, text_offset, visual_offset (measured), rows, donor
    injected: list = field(default_factory=list)  # what an injected fault said about itself (labels, not evidence)
    burst_answers: list | None = None  # endpoint replays: the server's answer in each burst run
    burst_verdicts: list | None = None  # endpoint replays: the verdict of each burst run
    burst_donors: list | None = None  # endpoint replays: one list per burst, whose isolated answer it equalled ([]: none; several: ambiguous)
    local_reference: str | None = None  # endpoint replays with --model: the local model's isolated answer
    # endpoint replays with --engine-traces: the first divergent stage behind the verdict (server_mismatch, batch_dependent,
    # contaminated), each burst run's, and per burst the requests that shared the encoder call or step where it parted
    stage: str | None = None
    burst_stages: list | None = None
    co_batched: list | None = None
    # What production's answer (`observed`) says on its own, never the verdict: ok | contaminated | diverged, None without one.
    observed_verdict: Verdict | None = None
    observed_donor: str | None = None  # whose isolated answer production returned, when observed_verdict is contaminated
    # endpoint replays with a warm phase (production caching, after the cold phases): its answer, its verdict (judged as a
    # burst run's, or cache_contaminated) with the stage behind it, and whether it parts from the request's cold run
    # (answers, first-token distribution, engine stages) with the first token's KL from the cold answer
    warm_answer: str | None = None
    warm_verdict: Verdict | None = None
    warm_stage: str | None = None
    warm_donor: str | None = None
    warm_parted: bool | None = None
    warm_first_token_kl: float | None = None
    # endpoint replays with --engine-traces: every cache read the engine recorded for this request's runs (phase, cache,
    # reuse, range, donor: analysis.cache_verdicts.read_json), and the one behind a cache_contaminated verdict
    cache_reads: list | None = None
    cache_read: dict | None = None

    def __post_init__(self) -> None:
        # A verdict outside the vocabulary (a corrupt .qdr) is refused where it is made.
        self.verdict = Verdict(self.verdict)
        if self.observed_verdict is not None:
            self.observed_verdict = Verdict(self.observed_verdict)
        if self.warm_verdict is not None:
            self.warm_verdict = Verdict(self.warm_verdict)

    def to_json(self) -> dict:
        """As the `requests` entries of the replay JSON (a NaN, e.g. a server's logprob, as null)."""
        # finite() rebuilds every dict and list, so the fields are read as they are: asdict's deep copy of each
        # outcome was half the time of a large log's --json (250 k requests)
        return strict_json.finite({f.name: getattr(self, f.name) for f in _OUTCOME_FIELDS})


_OUTCOME_FIELDS = fields(RequestOutcome)


@dataclass
class ReplayReport:
    """A whole burst: per-request outcomes, contamination matrix, event timeline, findings and traces."""

    source: str
    kind: str  # "capture" | "runtime-log"
    mode: str | None = None  # "threads" | "batched" | None for a log
    inject: str | None = None
    seed: int | None = None
    requests: list[RequestOutcome] = field(default_factory=list)
    contamination_ids: list[str] = field(default_factory=list)
    contamination: list[list[float | None]] | None = None  # rows: whose stream, cols: whose isolated encode rows
    events: list[Event] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unknown_lines: int = 0
    interrupted: bool = False
    # Sparse contamination: {request_id, donor, score, evidence} per contaminated request (None: from the matrix).
    cells: list[dict] | None = None
    # The source's absolute folder when the .qdr was saved (a `source` given relative to another working directory
    # still finds its capture's images); kept in the .qdr only, never in --json.
    source_dir: str | None = None
    # A runtime log's SQLite index (qdebug.replay.log_index.LogIndex) when the lists above hold only a page
    # of a large log; JSON, the TUI and the summary read the whole log from it.
    log_index: object | None = None
    event_filter: object | None = None
    traces: dict = field(default_factory=dict)  # id → replayed Trace (an endpoint replay's: the engine's, in the burst judged)
    references: dict = field(default_factory=dict)  # id → isolated reference Trace (an endpoint replay's: the local model's)
    engine_alone: dict = field(default_factory=dict)  # endpoint replays with --engine-traces: id → the engine's trace of it alone
    # ids whose traces a saved .qdr left out (its traces would have passed QDEBUG_REPORT_TRACE_MB); kept in the .qdr only
    traces_left_out: list[str] = field(default_factory=list)
    trace_limit_mb: int | None = None  # the bound it was saved under, when it left some out
    endpoint: str | None = None  # endpoint replays: the server's base URL
    repeats: int | None = None  # endpoint replays: how many bursts ran
    extra: dict = field(default_factory=dict)  # endpoint replays: served model, repeat counts, schedule

    def outcome(self, request_id: str) -> RequestOutcome | None:
        """The outcome of one request by id."""
        return next((r for r in self.requests if r.id == request_id), None)

    def to_json(self) -> dict:
        """The `--json` document of `qdebug replay`."""
        return strict_json.finite({
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "source": self.source,
            "kind": self.kind,
            "mode": self.mode,
            "inject": self.inject,
            "seed": self.seed,
            "interrupted": self.interrupted,
            "unknown_lines": self.unknown_lines,
            "requests": [r.to_json() for r in self.requests],
            "contamination": {"ids": self.contamination_ids, "matrix": self.dense_matrix(), "cells": self.contamination_cells()},
            "events": [e.to_json() for e in self.events],
            "findings": [f.to_json() for f in self.findings],
            **({"endpoint": self.endpoint, "repeats": self.repeats, **self.extra} if self.endpoint is not None else {}),
        })

    def dense_matrix(self) -> list[list[float | None]] | None:
        """The dense N×N cosines: only for a replayed capture of at most MATRIX_MAX_REQUESTS requests."""
        if self.kind != "capture" or len(self.contamination_ids) > MATRIX_MAX_REQUESTS:
            return None
        return self.contamination

    def contamination_cells(self) -> list[dict]:
        """The non-empty cells: who received whose rows, how sure, and the evidence (matrix cosines or log lines)."""
        if self.cells is not None:
            return self.cells
        ids, matrix = self.contamination_ids, self.contamination
        cells: list[dict] = []
        if not matrix:
            return cells
        for r in self.requests:
            if r.donor is None or r.id not in ids or r.donor not in ids:
                continue
            i, j = ids.index(r.id), ids.index(r.donor)
            score, own = matrix[i][j], matrix[i][i]
            if score is None:
                continue
            own_text = "unknown" if own is None else f"{own:.4f}"
            cells.append({"request_id": r.id, "donor": r.donor, "score": score,
                          "evidence": f"rows in {r.id}'s stream match {r.donor}'s isolated encoder rows: cosine {score:.4f} (its own: {own_text})"})
        return cells

    @classmethod
    def from_json(cls, data: dict) -> "ReplayReport":
        """Rebuild a report from its JSON document (traces are attached separately)."""
        try:
            event_fields = set(Event.__dataclass_fields__)
            return cls(
                source=data["source"], kind=data["kind"], mode=data.get("mode"), inject=data.get("inject"),
                seed=data.get("seed"), interrupted=data.get("interrupted", False), unknown_lines=data.get("unknown_lines", 0),
                requests=[RequestOutcome(**r) for r in data["requests"]],
                contamination_ids=list(data["contamination"]["ids"]), contamination=data["contamination"]["matrix"],
                cells=data["contamination"].get("cells"),
                events=[Event(**{k: v for k, v in e.items() if k in event_fields}) for e in data["events"]],
                findings=[Finding(**f) for f in data["findings"]],
                endpoint=data.get("endpoint"), repeats=data.get("repeats"),
                # an endpoint replay's own keys (served model, counts, matrix_of, engine_traces...): as to_json spread them
                extra={k: v for k, v in data.items() if k not in _KEYS} if data.get("endpoint") is not None else {},
            )
        except (KeyError, TypeError, ValueError) as exc:  # ValueError: a kind or severity outside the vocabulary
            raise TraceFormatError(f"replay report is malformed ({type(exc).__name__}: {exc})") from None


# the keys of to_json's document that are not an endpoint replay's own (those are spread beside them: `extra`)
_KEYS = {"format", "version", "source", "kind", "mode", "inject", "seed", "interrupted", "unknown_lines", "requests", "contamination",
         "events", "findings", "endpoint", "repeats", "traces_left_out", "trace_limit_mb"}
SOURCE_DIR_MEMBER = "source_dir.txt"  # the capture's absolute folder at save time
ROLES = ("replayed", "reference", "alone")  # the members' folders: traces/<role>/N.qdt
TRACE_LIMIT_ENV = "QDEBUG_REPORT_TRACE_MB"
DEFAULT_TRACE_MB = 1024  # within what load_report reads by default (safezip: 4 GiB in all, 1 GiB a member)


def save_report(report: ReplayReport, path: str | Path) -> Path:
    """Write a `.qdr` (report.json + each request's traces as .qdt members) atomically. A request's traces (replayed,
    reference, the engine's alone) go together, in the report's order, while their .qdt files total at most
    QDEBUG_REPORT_TRACE_MB MiB; the requests past it are listed in report.json's `traces_left_out`."""
    from qdebug.env import env_int
    from qdebug.trace.schema import save_trace

    path = Path(path)
    limit_mb = env_int(TRACE_LIMIT_ENV, DEFAULT_TRACE_MB, unit="MiB")
    by_role = dict(zip(ROLES, (report.traces, report.references, report.engine_alone)))
    ids = list(dict.fromkeys([*(r.id for r in report.requests), *(rid for traces in by_role.values() for rid in traces)]))
    left_out: list[str] = []
    used = 0
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf, tempfile.TemporaryDirectory() as work:
        zf.writestr(SOURCE_DIR_MEMBER, report.source_dir or str(Path(report.source).expanduser().resolve().parent))
        counts = dict.fromkeys(ROLES, 0)
        for rid in ids:
            mine = [(role, traces[rid]) for role, traces in by_role.items() if rid in traces]
            if not mine:
                continue
            files = []
            for role, trace in mine:
                member = Path(work) / f"{role}-{counts[role]}.qdt"
                save_trace(trace, member)
                files.append((role, member))
            size = sum(m.stat().st_size for _, m in files)
            if left_out or used + size > limit_mb << 20:  # in order: a report keeps its first requests' traces whole
                left_out.append(rid)
            else:
                used += size
                for role, member in files:
                    zf.write(member, f"traces/{role}/{counts[role]}.qdt")
                    zf.writestr(f"traces/{role}/{counts[role]}.id", rid)
                    counts[role] += 1
            for _, member in files:
                member.unlink()
        doc = report.to_json()
        if left_out:
            doc.update(traces_left_out=left_out, trace_limit_mb=limit_mb)
        zf.writestr("report.json", strict_json.dumps(doc, indent=1))
    report.traces_left_out, report.trace_limit_mb = left_out, (limit_mb if left_out else None)
    return path


def load_report(path: str | Path) -> ReplayReport:
    """Read a `.qdr` file (TraceFormatError, one line naming the first bad field, on anything unexpected).
    Members are size-checked before reading and streamed to disk (zip bombs are refused)."""
    from qdebug.safezip import SafeZip
    from qdebug.trace.schema import load_trace, require_saved, saved_json

    from .report_schema import validate_report_json

    path = Path(path)
    require_saved(path, "replay report", "a .qdr file written by `qdebug replay --save`")
    with SafeZip(path, "qdebug replay report") as zf, tempfile.TemporaryDirectory() as work:
        data = saved_json(zf, "report.json", path, ".qdr")
        if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT:
            raise TraceFormatError(f"{path}: not a qdebug replay report")
        validate_report_json(data, str(path))
        report = ReplayReport.from_json(data)
        if SOURCE_DIR_MEMBER in zf.names():
            try:
                report.source_dir = zf.read(SOURCE_DIR_MEMBER).decode()[:4096]
            except UnicodeDecodeError:
                raise TraceFormatError(f"{path}: member {SOURCE_DIR_MEMBER} is not UTF-8 text") from None
        report.traces_left_out, report.trace_limit_mb = list(data.get("traces_left_out") or []), data.get("trace_limit_mb")
        where = {"replayed": report.traces, "reference": report.references, "alone": report.engine_alone}
        for name in zf.names():
            if name.startswith("traces/") and name.endswith(".qdt"):
                parts = name.split("/")
                if len(parts) != 3 or parts[1] not in ROLES or not parts[2][:-4].isdigit():
                    raise TraceFormatError(f"{path}: unexpected member {name[:120]} (expected traces/replayed|reference|alone/N.qdt)")
                _, role, member = parts
                try:
                    rid = zf.read(name[:-4] + ".id").decode()
                except UnicodeDecodeError:
                    raise TraceFormatError(f"{path}: member {name[:-4]}.id is not UTF-8 text") from None
                target = zf.extract(name, Path(work) / f"{role}-{member}")
                try:
                    trace = load_trace(target)
                except TraceFormatError as exc:  # name the member inside the report, not the temporary file
                    raise TraceFormatError(exc.message.replace(str(target), f"{path}:{name}")) from None
                where[role][rid] = trace
    return report
