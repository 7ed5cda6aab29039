"""The JSON Schema of a trace's trace.json, and the checks a schema cannot say (lengths that must agree)."""

from __future__ import annotations

from qdebug.errors import TraceFormatError
from qdebug.validation import first_problem

from .cached import schema_problem

_INT = {"type": "integer", "minimum": 0}
_ANY_INT = {"type": "integer"}
_NUM = {"type": ["number", "null"]}  # null: a NaN or infinity (JSON has neither)
_STR = {"type": "string"}
_OPT_STR = {"type": ["string", "null"]}
_OPT_INT = {"type": ["integer", "null"]}


def _list(items: dict, n: int | None = None) -> dict:
    out: dict = {"type": "array", "items": items}
    if n is not None:
        out.update(minItems=n, maxItems=n)
    return out


def _obj(required: dict, optional: dict | None = None) -> dict:
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}


FINDING = _obj({"kind": _STR, "severity": _STR, "message": _STR},
               {"stage": _OPT_STR, "request_id": _OPT_STR, "donor": _OPT_STR, "layer": _OPT_INT})

TRACE_SCHEMA = _obj(
    {
        "format": {"const": "qdebug-trace"},
        "version": _ANY_INT,
        "meta": _obj(
            {
                "model": _obj({"spec": _STR, "architecture": _STR, "device": _STR, "dtype": _STR},
                              {"path": _STR, "attn_kernel": _STR}),
                "num_layers": _INT,
                "num_heads": _INT,
            },
            {"num_kv_heads": _INT, "hidden_size": _INT, "vocab_size": _INT, "attn_capture": _STR, "input_path": _STR},
        ),
        "request": _obj({"prompt": _STR}, {"id": _STR, "images": _list(_STR), "max_new_tokens": _INT, "image_sha256": _list(_STR)}),
        "prompt_text": _STR,
        "input_ids": _list(_ANY_INT),
        "tokens": _list(_STR),
        "images": _list(_obj({
            "index": _INT, "path": _STR, "size": _list(_INT, 2), "grid_thw": _list(_INT, 3),
            "span": {"type": ["array", "null"], "items": _INT, "minItems": 2, "maxItems": 2}, "rows": _INT, "cols": _INT,
        })),
        "stages": _list(_obj({"name": _STR, "summary": {"type": "object"},
                              "checks": _list(_obj({"name": _STR, "ok": {"type": "boolean"}}, {"detail": _STR, "kind": _STR}))})),
        "steps": _list(_obj({
            "index": _INT, "token_id": _ANY_INT, "token": _STR, "prob": _NUM, "entropy": _NUM,
            "topk": _obj({"token_ids": _list(_ANY_INT), "tokens": _list(_STR), "probs": _list(_NUM)}),
        })),
        "generated_ids": _list(_ANY_INT),
        "generated_text": _STR,
        "attn_queries": _list(_INT),
        "findings": _list(FINDING),
    }
)


def validate_trace_json(data, where: str) -> None:
    """TraceFormatError naming the first missing or wrong field of a trace.json document."""
    problem = first_problem(TRACE_SCHEMA, data)
    if problem is None:
        problem = _consistency(data)
    if problem is not None:
        raise TraceFormatError(f"{where}: malformed trace: {problem}")


def _consistency(data: dict) -> str | None:
    """What must agree between fields (lengths, spans inside the prompt, one stage per name)."""
    n = len(data["input_ids"])
    if len(data["tokens"]) != n:
        return f"tokens: expected {n} entries (one per input id), got {len(data['tokens'])}"
    for i, img in enumerate(data["images"]):
        span = img["span"]
        if span is not None and not 0 <= span[0] <= span[1] <= n:
            return f"images[{i}].span: expected [start, end) inside the {n} input ids, got {span}"
    names = [s["name"] for s in data["stages"]]
    if len(set(names)) != len(names):
        return "stages: a stage name appears twice"
    for i, step in enumerate(data["steps"]):
        topk = step["topk"]
        if not len(topk["token_ids"]) == len(topk["tokens"]) == len(topk["probs"]):
            return f"steps[{i}].topk: token_ids, tokens and probs differ in length"
    return schema_problem(data["meta"].get("engine"), n)  # an engine trace's prefix served from a cache
