"""Validate a loaded JSON document against its JSON Schema and name the first missing or wrong field."""

from __future__ import annotations

_KIND = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer", "number": "a number",
         "boolean": "true or false", "null": "null"}


def field_name(path) -> str:
    """`meta.model.spec`, `images[0].size[1]`: a JSON path as a user reads it."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def _expected(schema_type: str | list[str]) -> str:
    types = schema_type if isinstance(schema_type, list) else [schema_type]
    return " or ".join(_KIND.get(t, t) for t in types)


def _got(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _document_order(data, path) -> tuple:
    """Where a path sits in the document as written (keys by their position, list items by index)."""
    out, node = [], data
    for part in path:
        if isinstance(node, dict):
            keys = list(node)
            out.append(keys.index(part) if part in node else len(keys))
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(part)
            node = node[part]
        else:
            break
    return tuple(out)


def first_problem(schema: dict, data) -> str | None:
    """None when `data` fits `schema`, else one line: the first bad field (in document order) and what was expected."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: _document_order(data, e.absolute_path))
    if not errors:
        return None
    err = errors[0]
    where = field_name(err.absolute_path)
    if err.validator == "required":
        missing = next((k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance), "?")
        prefix = f"{where}." if err.absolute_path else ""
        return f"{prefix}{missing}: missing (required)"
    if err.validator == "type":
        return f"{where}: expected {_expected(err.validator_value)}, got {_got(err.instance)}"
    if err.validator in ("minItems", "maxItems"):
        return f"{where}: expected {err.validator_value} {'or more' if err.validator == 'minItems' else 'or fewer'} items, got {len(err.instance)}"
    if err.validator == "minimum":
        return f"{where}: expected at least {err.validator_value}, got {err.instance!r}"[:300]
    if err.validator in ("enum", "const"):
        allowed = err.validator_value if err.validator == "enum" else [err.validator_value]
        return f"{where}: expected one of {', '.join(map(repr, allowed))}, got {err.instance!r}"[:300]
    return f"{where}: {err.message}"[:300]
