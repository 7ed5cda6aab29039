"""Every module of qdebug sits in a row of ARCHITECTURE.md's layer table and imports only its own row or rows above
(imports inside functions included; `if TYPE_CHECKING:` blocks excluded, they never run); no import circle exists,
in the package or among the benchmark scripts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """(layer name, [path or folder prefix under the repo]) per row of the '## Layers' table, top to bottom."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] == "layer" or set(cells[0]) <= {"-"}:
            continue
        names = re.findall(r"`([^`]+)`", cells[1])
        rows.append((cells[0], [n if n.startswith("qdebug/") else "qdebug/" + n for n in names]))
    return rows


def layer_of(rows, rel: str) -> int | None:
    """The row holding a repo-relative file path (the longest matching entry wins), or None."""
    best = None
    for i, (_, names) in enumerate(rows):
        for name in names:
            if rel == name or (name.endswith("/") and rel.startswith(name)):
                if best is None or len(name) > best[1]:
                    best = (i, len(name))
    return None if best is None else best[0]


def module_file(name: str) -> Path | None:
    """The file of a dotted qdebug module name (a module or a package), or None."""
    for p in (REPO / (name.replace(".", "/") + ".py"), REPO / name.replace(".", "/") / "__init__.py"):
        if p.exists():
            return p
    return None


def runtime_imports(rel: str, source: str, typing_too: bool = False):
    """(line, dotted module) of each qdebug module the source imports when it runs (function bodies included);
    `typing_too`: `if TYPE_CHECKING:` imports as well (a circle through them is still a circle of dependence)."""
    tree = ast.parse(source)
    typing_only = set() if typing_too else {
        id(m) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test) for m in ast.walk(n)}
    package = list(Path(rel).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) if node.level else node.module or ""
            targets = [base] + [f"{base}.{a.name}" for a in node.names if module_file(f"{base}.{a.name}")]
        else:
            continue
        for target in targets:
            if target.startswith("qdebug") and module_file(target) is not None:
                yield node.lineno, target


def violations(rows, files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(imports that go up the table, files in no row) for {repo-relative path: source}."""
    up, unplaced = [], []
    for rel, source in sorted(files.items()):
        src = layer_of(rows, rel)
        if src is None:
            unplaced.append(rel)
            continue
        for line, target in runtime_imports(rel, source):
            dst = layer_of(rows, str(module_file(target).relative_to(REPO)))
            if dst is not None and dst > src:
                up.append(f"{rel}:{line} ({rows[src][0]}) imports {target} ({rows[dst][0]})")
    return up, unplaced


def _package_sources() -> dict[str, str]:
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in sorted((REPO / "qdebug").rglob("*.py"))}


def test_every_module_imports_only_its_row_or_rows_above():
    rows = layer_table((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert [name for name, _ in rows][:3] == ["vocabulary", "model", "trace"] and rows[-1][0] == "cli / tui"
    up, unplaced = violations(rows, _package_sources())
    assert not unplaced, f"modules in no row of ARCHITECTURE.md's layer table: {unplaced}"
    assert not up, up


def test_the_order_check_flags_an_import_up_the_table():
    rows = layer_table((REPO / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    planted = {"qdebug/trace/planted.py": "def f():\n    from qdebug.render.palette import verdict_style\n",
               "qdebug/model/typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from qdebug.trace.schema import Trace\n"}
    up, unplaced = violations(rows, planted)
    assert up == ["qdebug/trace/planted.py:2 (trace) imports qdebug.render.palette (render)"]
    assert violations(rows, {"qdebug/elsewhere.py": ""})[1] == ["qdebug/elsewhere.py"]


def import_circles(files: dict[str, str]) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a loop."""
    graph = {}
    for rel, source in files.items():
        name = ".".join(Path(rel).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        graph[name] = {t for _, t in runtime_imports(rel, source, typing_too=True) if t != name}
    return circles(graph)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm)."""
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    assert import_circles(_package_sources()) == []


def benchmark_imports(files: dict[str, str]) -> dict[str, set[str]]:
    """Script name → the sibling scripts it imports (a benchmark runs from its folder and imports them by bare name),
    imports inside functions included."""
    names = {Path(rel).stem for rel in files}
    graph: dict[str, set[str]] = {}
    for rel, source in files.items():
        found = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
        graph[Path(rel).stem] = (found & names) - {Path(rel).stem}
    return graph


def test_no_import_circles_in_the_benchmarks():
    files = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in sorted((REPO / "benchmarks").glob("*.py"))}
    assert "engine" in benchmark_imports(files)
    assert circles(benchmark_imports(files)) == []
    planted = {"benchmarks/a.py": "def f():\n    from b import g\n", "benchmarks/b.py": "import a\n"}
    assert circles(benchmark_imports(planted)) == [["a", "b"]]


def test_the_circle_check_finds_a_planted_circle():
    files = {"qdebug/render/files.py": "def f():\n    from .png_text import save\n", "qdebug/render/png_text.py": "from .files import f\n"}
    assert import_circles(files) == [["qdebug.render.files", "qdebug.render.png_text"]]


def test_the_circle_check_sees_type_checking_imports():
    files = {"qdebug/tui/files.py": "from .screens import batch\n",
             "qdebug/tui/screens/batch.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..files import FileRouter\n"}
    assert import_circles(files) == [["qdebug.tui.files", "qdebug.tui.screens.batch"]]
