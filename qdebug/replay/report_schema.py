"""The JSON Schema of a replay report's report.json (the `.qdr` file), checked field by field on load."""

from __future__ import annotations

from qdebug.errors import TraceFormatError
from qdebug.trace.trace_schema import FINDING, _list, _obj
from qdebug.validation import first_problem
from qdebug.vocab import VERDICTS

_OPT_STR = {"type": ["string", "null"]}
_OPT_INT = {"type": ["integer", "null"]}
_OPT_NUM = {"type": ["number", "null"]}

REPORT_SCHEMA = _obj(
    {
        "format": {"const": "qdebug-replay"},
        "source": {"type": "string"},
        "kind": {"type": "string"},  # capture | runtime-log (| more sources later: readers compare, never index)
        "requests": _list(_obj(
            {"id": {"type": "string"}},
            {"image": _OPT_STR, "reference": _OPT_STR, "replayed": _OPT_STR, "observed": _OPT_STR,
             "verdict": {"enum": list(VERDICTS)}, "donor": _OPT_STR, "text_offset": _OPT_INT, "visual_offset": _OPT_INT,
             "error": _OPT_STR, "line": _OPT_INT, "first_token_kl": _OPT_NUM, "first_token_topk_overlap": _OPT_NUM,
             "observed_verdict": {"enum": [*map(str, VERDICTS), None]}, "observed_donor": _OPT_STR},
        )),
        "contamination": _obj({"ids": _list({"type": "string"}), "matrix": {"type": ["array", "null"], "items": _list(_OPT_NUM)}}),
        "events": _list(_obj(
            {"kind": {"type": "string"}},
            {"request_id": _OPT_STR, "t": _OPT_NUM, "seq": {"type": "integer"}, "offset": _OPT_INT, "text_offset": _OPT_INT,
             "tokens": _OPT_INT, "donor": _OPT_STR, "line": _OPT_INT, "message": {"type": "string"}},
        )),
        "findings": _list(FINDING),
    },
    {"version": {"type": "integer"}, "mode": _OPT_STR, "inject": _OPT_STR, "seed": _OPT_INT,
     "interrupted": {"type": "boolean"}, "unknown_lines": {"type": "integer", "minimum": 0},
     # a saved report's: the requests whose traces it left out, past its bound in MiB
     "traces_left_out": _list({"type": "string"}), "trace_limit_mb": {"type": "integer", "minimum": 1},
     # an endpoint replay's own keys that the views read (`ReplayReport.extra`)
     "endpoint": _OPT_STR, "repeats": _OPT_INT, "matrix_of": {"type": "string"}, "engine_caches_said": {"type": "string"},
     "engine_traces": _obj({}, {"said": {"type": "string"}, "folder": {"type": "string"},
                                "judged_bursts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}})},
)


def validate_report_json(data, where: str) -> None:
    """TraceFormatError naming the first missing or wrong field of a report.json document."""
    problem = first_problem(REPORT_SCHEMA, data)
    if problem is None:
        ids, matrix = data["contamination"]["ids"], data["contamination"]["matrix"]
        if matrix is not None and (len(matrix) != len(ids) or any(len(row) != len(ids) for row in matrix)):
            problem = f"contamination.matrix: expected {len(ids)}×{len(ids)} (one row and column per id)"
    if problem is not None:
        raise TraceFormatError(f"{where}: malformed replay report: {problem}")
