"""Imports flow one way: nothing below render pulls in rich, textual or matplotlib; `--help` stays light."""

import subprocess
import sys

BELOW_RENDER = [
    "qdebug.model.load", "qdebug.model.attention", "qdebug.trace.runner", "qdebug.trace.estimate", "qdebug.trace.policy", "qdebug.trace.stepper", "qdebug.trace.schema",
    "qdebug.replay.engine", "qdebug.replay.formats.detect", "qdebug.replay.report",
    "qdebug.analysis.diff", "qdebug.analysis.replay", "qdebug.analysis.attention", "qdebug.analysis.detectors.layout",
    "qdebug.export.build", "qdebug.export.ort_run", "qdebug.export.as_trace", "qdebug.analysis.onnx_findings",
]


def test_lower_layers_import_no_ui_libraries():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in BELOW_RENDER)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'textual', 'matplotlib'))\n"
        + "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_model_layer_does_not_import_upper_layers():
    code = (
        "import sys\nimport qdebug.model.load, qdebug.model.attention\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('qdebug.trace', 'qdebug.replay', 'qdebug.analysis', 'qdebug.render', 'qdebug.tui')))\n"
        "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_export_layer_uses_only_model_and_trace():
    """qdebug.export sits above trace: it may use model and trace, never replay, analysis, render or the UI."""
    code = (
        "import sys\nimport qdebug.export.build, qdebug.export.ort_run, qdebug.export.as_trace, qdebug.export.manifest\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('qdebug.replay', 'qdebug.analysis', 'qdebug.render', 'qdebug.tui', 'qdebug.commands')))\n"
        "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_trace_layer_imports_nothing_from_replay():
    """qdebug.trace sits below qdebug.replay: importing every trace module pulls in no replay module."""
    code = (
        "import importlib, pkgutil, sys\nimport qdebug.trace\n"
        "for m in pkgutil.iter_modules(qdebug.trace.__path__):\n"
        "    importlib.import_module('qdebug.trace.' + m.name)\n"
        "bad = sorted(m for m in sys.modules if m.startswith('qdebug.replay'))\n"
        "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_trace_sources_name_no_replay_module():
    """No source file under qdebug/trace/ imports qdebug.replay, even lazily inside a function."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "qdebug" / "trace"
    bad = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            level = node.level if isinstance(node, ast.ImportFrom) else 0
            if any(n.startswith("qdebug.replay") for n in names) or (level >= 2 and any(n.startswith("replay") for n in names)):
                bad.append(f"{path.name}:{node.lineno}")
    assert not bad, bad


# Modules whose event kinds and verdicts are spelled only as qdebug.vocab members. replay/formats/ is left out:
# its parsers and synthetic logs match and write the runtime log's own words ("stitch", "desync"), which are text.
VOCAB_CLEAN = ["qdebug/trace/hooks.py", "qdebug/replay", "qdebug/analysis", "qdebug/render", "qdebug/cli.py"]
VOCAB_EXEMPT_DIRS = ("qdebug/replay/formats/",)


def _field_names(tree) -> set[int]:
    """ids of string constants that name a field (docstrings, dict keys, `.get(key)`, `x[key]`), not a word."""
    import ast

    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            ids.add(id(body[0].value))
        elif isinstance(node, ast.Dict):
            ids.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            ids.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            ids.add(id(node.args[0]))
    return ids


def test_event_kinds_and_verdicts_are_vocab_members():
    """trace/hooks.py, replay/, analysis/, render/ and cli.py spell no event kind or verdict as a string literal (qdebug.vocab does)."""
    import ast
    from pathlib import Path

    from qdebug.vocab import EventKind, Verdict

    words = {m.value for m in EventKind} | {m.value for m in Verdict}
    repo = Path(__file__).resolve().parents[2]
    files = []
    for entry in VOCAB_CLEAN:
        p = repo / entry
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    bad = []
    for path in files:
        rel = path.relative_to(repo).as_posix()
        if rel.startswith(VOCAB_EXEMPT_DIRS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _field_names(tree)
        bad += [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in words and id(n) not in skip]
    assert not bad, "spell these as qdebug.vocab members:\n" + "\n".join(bad)
