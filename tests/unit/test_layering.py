"""Imports flow one way: nothing below render pulls in rich, textual or matplotlib; `--help` stays light."""

from tests.imports import UI_LIBRARIES, forbidden_imports

BELOW_RENDER = [
    "qdebug.model.load", "qdebug.model.attention", "qdebug.trace.runner", "qdebug.trace.estimate", "qdebug.trace.policy", "qdebug.trace.stepper", "qdebug.trace.schema",
    "qdebug.replay.engine", "qdebug.replay.formats.detect", "qdebug.replay.report",
    "qdebug.analysis.diff", "qdebug.analysis.replay", "qdebug.analysis.attention", "qdebug.analysis.detectors.layout",
    "qdebug.export.build", "qdebug.export.ort_run", "qdebug.export.as_trace", "qdebug.analysis.onnx_findings",
]


def test_lower_layers_import_no_ui_libraries():
    assert not forbidden_imports(BELOW_RENDER, roots=UI_LIBRARIES)


def test_model_layer_does_not_import_upper_layers():
    upper = ("qdebug.trace", "qdebug.replay", "qdebug.analysis", "qdebug.render", "qdebug.tui")
    assert not forbidden_imports(["qdebug.model.load", "qdebug.model.attention"], prefixes=upper)


def test_export_layer_uses_only_model_and_trace():
    """qdebug.export sits above trace: it may use model and trace, never replay, analysis, render or the UI."""
    modules = ["qdebug.export.build", "qdebug.export.ort_run", "qdebug.export.as_trace", "qdebug.export.manifest"]
    assert not forbidden_imports(modules, prefixes=("qdebug.replay", "qdebug.analysis", "qdebug.render", "qdebug.tui", "qdebug.commands"))


def test_engine_layer_uses_only_model_and_trace():
    """qdebug.engine (the vLLM plugin) runs inside a vLLM environment: it may use model and trace, and no library
    that environment lacks (the UI, the HTTP server and client, ONNX, typer)."""
    upper = ("qdebug.replay", "qdebug.analysis", "qdebug.render", "qdebug.tui", "qdebug.commands", "qdebug.serve", "qdebug.export")
    assert not forbidden_imports(packages=["qdebug.engine"], prefixes=upper)
    assert not forbidden_imports(packages=["qdebug.engine"], roots=(*UI_LIBRARIES, "typer", "httpx", "fastapi", "uvicorn", "onnx",
                                                                    "onnxruntime", "scipy", "textual_image", "vllm"))


def test_trace_layer_imports_nothing_from_replay():
    """qdebug.trace sits below qdebug.replay: importing every trace module (subpackages too) pulls in no replay module."""
    assert not forbidden_imports(packages=["qdebug.trace"], prefixes=("qdebug.replay",))


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


def test_tui_sources_import_no_torch():
    """The TUI calls the commands layer (run_replay, the log index, the loaders) for anything that runs a model: no
    source file under qdebug/tui/ imports torch, even lazily inside a function."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "qdebug" / "tui"
    bad = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "torch" or n.startswith("torch.") for n in names):
                bad.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not bad, bad


# Words that also mean something else in qdebug (a log level, a widget id, a warnings filter, a JSON or summary key, a
# panel title, a model input, a fault label's prefix): a literal one is flagged only where a vocabulary word is expected (below).
ORDINARY = {"ok", "info", "warning", "error", "contamination", "injected", "fingerprint", "position_ids", "deepstack", "first_divergence"}
# Names whose values are vocabulary words: `x.kind == "..."`, `kind="..."`, `verdict: str = "..."`.
VOCAB_NAMES = ("kind", "verdict", "severity")
# Calls whose positional arguments hold vocabulary words: (callee, position, vocabulary name).
VOCAB_ARGS = {("Finding", 0): "kind", ("Finding", 1): "severity", ("Check", 3): "kind", ("Event", 0): "kind"}


def _words() -> dict[str, set[str]]:
    """The values of each vocabulary name, and `all`: every event kind, verdict, severity and finding kind."""
    from qdebug.vocab import EventKind, FindingKind, Severity, StageVerdict, Verdict

    words = {"kind": {m.value for m in (*EventKind, *FindingKind)}, "verdict": {m.value for m in (*Verdict, *StageVerdict)},
             "severity": {m.value for m in Severity}}
    words["all"] = set().union(*words.values())
    return words


def _tail(node) -> str | None:
    """`kind` for `kind`, `e.kind` and `self.kind`; None for anything else."""
    import ast

    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _strings(node) -> list:
    """The string constants `node` is, or holds as a tuple/list/set literal."""
    import ast

    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _vocab_positions(tree) -> list[tuple[object, str, bool]]:
    """(constant, vocabulary name, any literal is wrong) for every string literal where a vocabulary word belongs."""
    import ast

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for side in sides:
                names = {_tail(o) for o in sides if o is not side} & set(VOCAB_NAMES)
                out += [(c, name, False) for name in names for c in _strings(side)]
        elif isinstance(node, ast.Call):
            callee = _tail(node.func)
            strict = callee in ("Finding", "Check")  # a finding's kind is always a FindingKind member
            out += [(c, kw.arg, strict and kw.arg == "kind") for kw in node.keywords if kw.arg in VOCAB_NAMES for c in _strings(kw.value)]
            out += [(c, VOCAB_ARGS[callee, i], strict and VOCAB_ARGS[callee, i] == "kind")
                    for i, arg in enumerate(node.args) if (callee, i) in VOCAB_ARGS for c in _strings(arg)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [(c, _tail(t), False) for t in targets if _tail(t) in VOCAB_NAMES for c in _strings(node.value)]
    return out


def _text_searches(tree) -> set[int]:
    """ids of string constants searched for in text (`"stitch" in line`): a runtime log's own words, not vocabulary."""
    import ast

    return {id(node.left) for node in ast.walk(tree) if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
            and all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and not isinstance(node.comparators[0], (ast.Tuple, ast.List, ast.Set))}


def spelled_words(source: str) -> list[str]:
    """`line: 'word'` for each event kind, verdict, severity or finding kind that `source` spells as a string literal."""
    import ast

    tree = ast.parse(source)
    words = _words()
    found = {id(c): (c, f"{c.value!r}") for c, name, strict in _vocab_positions(tree) if strict or c.value in words[name]}
    skip = _field_names(tree) | _text_searches(tree)
    found.update({id(n): (n, f"{n.value!r}") for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and n.value in words["all"] - ORDINARY and id(n) not in skip})
    return sorted(f"{n.lineno}: {text}" for n, text in found.values())


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


def test_event_kinds_verdicts_and_finding_kinds_are_vocab_members():
    """No module of qdebug/ but qdebug/vocab.py spells an event kind, verdict, severity or finding kind as a string literal."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    bad = [f"{path.relative_to(root).as_posix()}:{hit}" for path in sorted((root / "qdebug").rglob("*.py"))
           if path.relative_to(root).as_posix() != "qdebug/vocab.py" for hit in spelled_words(path.read_text(encoding="utf-8"))]
    assert not bad, "spell these as qdebug.vocab members:\n" + "\n".join(bad)


def test_the_vocabulary_check_flags_planted_literals():
    """The check above is not vacuous: it finds words in each position, and leaves field names and text searches alone."""
    planted = (
        'BAD = {"buffer_overwrite", "desync"}\n'            # 1: distinctive words anywhere
        'if e.kind == "stitch": pass\n'                      # 2: a compared event kind
        'if outcome.verdict != "ok": pass\n'                 # 3: an ordinary word where a verdict belongs
        'f = Finding("contamination", "error", "m")\n'       # 4: a finding's kind and severity
        'c = Check("rows", ok, "", "nan_inf")\n'             # 5: a check's kind
        'c = Check("rows", ok, kind="made_up")\n'            # 6: any literal as a finding kind
        'kind: str = "first_divergence"\n'                   # 7: a default
    )
    assert spelled_words(planted) == ["1: 'buffer_overwrite'", "1: 'desync'", "2: 'stitch'", "3: 'ok'", "4: 'contamination'",
                                      "4: 'error'", "5: 'nan_inf'", "6: 'made_up'", "7: 'first_divergence'"]
    clean = (
        'if "stitch" in text: pass\n'                        # the runtime log's own word
        'n = counts["desync"] + row.get("contaminated", 0)\n'  # field names
        'warnings.simplefilter("error")\n'                   # an ordinary word in an ordinary place
        'if event.kind in ("done", "error"): pass\n'         # a run status, not an event or finding kind
        'ok = {"status": "ok"}\n'
    )
    assert spelled_words(clean) == []


def test_no_module_asks_an_adapter_what_it_has_by_hasattr():
    """Adapters declare what they have (encoders, layer types, linear dims) on the base class; code outside
    qdebug/model/adapters/ asks the declaration, never `hasattr(adapter, ...)`."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "qdebug"
    pattern = re.compile(r"hasattr\([^)]*adapter")
    bad = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if "adapters" not in p.parts
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not bad, bad


# Literals that spell a stage word but do not name a stage, counted per module (any other one fails the check below).
STAGE_WORD_USES = {
    ("qdebug/render/palette.py", "'encode'"): 1,  # the legend word of EventKind.ENCODE_START, an event kind's look
    ("qdebug/render/palette.py", "'sync'"): 1,  # the legend word of EventKind.SYNC
    ("qdebug/trace/tensor_names.py", "'encode'"): 1,  # TensorKind.ENCODE: a tensor's name, its own vocabulary
    ("qdebug/export/build.py", "'logits'"): 2,  # the ONNX prefill graph's output name (its role is StageName.LOGITS)
    ("qdebug/export/manifest.py", "'layer.N'"): 1,  # a manifest role's pattern, shown in its error text
    ("qdebug/tui/controllers/command.py", "'layer.N'"): 1,  # the placeholder a breakpoint error shows before a model is loaded
}


def spelled_stages(source: str) -> list[str]:
    """`line: 'word'` for each stage name `source` spells as a literal: a fixed one (`"sync"`), a layer or step one
    (`"layer.0"`, `"step.*"`, `"layer."` as a prefix) or one built in an f-string (`f"layer.{i}"`); docstrings aside."""
    import ast
    import re

    from qdebug.vocab import StageName

    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part, after in zip(node.values, node.values[1:]):
                skip.add(id(part))
                if isinstance(part, ast.Constant) and isinstance(after, ast.FormattedValue):
                    m = re.search(r"(?:^|\s)(layer|step)\.$", part.value)
                    if m:
                        found[id(part)] = f"{node.lineno}: f'{m.group(1)}.{{…}}'"
            if node.values:
                skip.add(id(node.values[-1]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value in set(StageName) or re.fullmatch(r"(layer|step)\.(\d+|\*|N|K)?", node.value):
                found[id(node)] = f"{node.lineno}: {node.value!r}"
    return sorted(found.values(), key=lambda hit: (int(hit.split(":")[0]), hit))


def _docstrings(tree) -> set[int]:
    """ids of the docstring constants of `tree`'s module, classes and functions."""
    import ast

    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_stage_names_are_vocab_members():
    """No module of qdebug/ but qdebug/vocab.py spells a stage name as a literal: `StageName` members, `layer_stage`,
    `step_stage`, `EVERY_STEP` and `is_layer_stage`/`is_step_stage`/`stage_number` say them; STAGE_WORD_USES lists,
    with why, the literals that spell a stage word and mean something else."""
    from collections import Counter
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    hits: dict[tuple[str, str], list[str]] = {}
    for path in sorted((root / "qdebug").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel != "qdebug/vocab.py":
            for hit in spelled_stages(path.read_text(encoding="utf-8")):
                hits.setdefault((rel, hit.split(": ", 1)[1]), []).append(hit)
    counts = Counter({key: len(found) for key, found in hits.items()})
    bad = [f"{rel}:{hit}" for (rel, word), found in hits.items() if len(found) > STAGE_WORD_USES.get((rel, word), 0) for hit in found]
    assert not bad, "spell these stage names with qdebug.vocab (or list a non-stage use in STAGE_WORD_USES):\n" + "\n".join(bad)
    stale = {key: n for key, n in STAGE_WORD_USES.items() if counts[key] != n}
    assert not stale, f"STAGE_WORD_USES no longer matches the sources (found {dict((k, counts[k]) for k in stale)}): update it"


def test_the_stage_name_check_flags_planted_literals():
    """The check above is not vacuous: it finds stage names in each form and position, and leaves docstrings,
    tensor names, longer words and mid-word prefixes alone."""
    planted = (
        'stages = {"preprocess": p, "encode": e}\n'            # 1: dict keys
        'sync = trace.stages.get("sync")\n'                     # 2: a lookup
        'if stage.name == "logits": pass\n'                     # 3: a comparison
        'name = f"layer.{i}"\n'                                 # 4: a layer stage built in an f-string
        'Finding(k, s, stage=f"step.{k}", message=f"at layer.{n} x")\n'  # 5: a step stage, a layer named in a message
        'if name.startswith("layer."): pass\n'                  # 6: a prefix check
        'bp = {"step.*", "step.0"}\n'                           # 7: a breakpoint on every step, one step
    )
    assert spelled_stages(planted) == ["1: 'encode'", "1: 'preprocess'", "2: 'sync'", "3: 'logits'", "4: f'layer.{…}'",
                                       "5: f'layer.{…}'", "5: f'step.{…}'", "6: 'layer.'", "7: 'step.*'", "7: 'step.0'"]
    clean = (
        'def f():\n    """Reads "sync" and layer.N."""\n'      # a docstring
        'T = {"layer.hidden": 1, "step.logits": 2}\n'          # tensor names
        'x = "encoder"; y = "synced rows"; z = f"sublayer.{i}"\n'  # longer words, a prefix inside a word
        'w = f"transpose-weight:layer.{i}.{p}"\n'              # a weight spec, not a stage
    )
    assert spelled_stages(clean) == []
