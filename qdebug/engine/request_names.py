"""A request's name and whether it is traced, from its sampling params' extra_args: light (no import beyond the
standard library), as the engine core's cache recording and the worker's step hooks read it for every request."""

from __future__ import annotations

MAX_ID = 256  # characters of a client's qdebug_id the plugin takes as a request's name (qdebug's own stay under it)


def wants_trace(extra_args: dict | None, trace_all: bool) -> bool:
    """Whether a request is traced: the user traces all, or the client tagged it (`vllm_xargs.qdebug_trace`)."""
    if trace_all:
        return True
    value = (extra_args or {}).get("qdebug_trace")
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def client_name(extra_args: dict | None, req_id: str) -> tuple[str, str | None]:
    """The name a traced request goes by, and why the client's `qdebug_id` was not taken (None when it was): a
    string (or number) of at most MAX_ID characters; else the server's request id (a 30 MB id would be stored in
    the index and the trace)."""
    value = (extra_args or {}).get("qdebug_id")
    if value is None or value == "":
        return req_id, None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return req_id, f"qdebug_id is a {type(value).__name__} (expected a string)"
    value = str(value)
    if len(value) > MAX_ID:
        return req_id, f"qdebug_id is {len(value):,} characters (at most {MAX_ID})"
    return value, None
