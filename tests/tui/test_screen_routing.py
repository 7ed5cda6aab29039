"""Screens never import each other: only the app and its file router (tui/files.py) import screen modules and push
screens; the router shows each document on the screen that fits it."""

from __future__ import annotations

import ast
from pathlib import Path

from qdebug.tui.app import build_app
from qdebug.tui.files import FileRouter
from qdebug.tui.screens.batch import BatchScreen
from qdebug.tui.screens.request import RequestScreen

from .conftest import REPORT, ROOT, SIZE, TRACE, wait_for

TUI = ROOT / "qdebug" / "tui"
SCREENS = "qdebug.tui.screens"
ROUTERS = {"qdebug.tui.app", "qdebug.tui.files"}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, source: str | None = None) -> set[str]:
    """Every module `path` (or `source` as if it were there) imports, anywhere in it (functions and TYPE_CHECKING
    blocks too), as absolute names."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source if source is not None else path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(p for p in (base, node.module) if p)
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # `from . import request` names a module
    return found


def _screen_modules(imports: set[str]) -> set[str]:
    """The screen modules among `imports` (a name imported from one counts as that module)."""
    modules = {".".join(name.split(".")[:4]) for name in imports if name.startswith(SCREENS + ".")}
    return {m for m in modules if (TUI / "screens" / f"{m.rpartition('.')[2]}.py").is_file()}


def test_no_screen_module_imports_another():
    for path in sorted((TUI / "screens").glob("*.py")):
        others = _screen_modules(_imports(path)) - {_module(path)}
        assert not others, f"{path.name} imports {sorted(others)}: push screens through the app or its FileRouter"


def test_only_the_app_and_the_file_router_import_screens():
    for path in sorted(TUI.rglob("*.py")):
        module = _module(path)
        if module.startswith(SCREENS) or module in ROUTERS:
            continue
        assert not _screen_modules(_imports(path)), f"{module} imports a screen module"


def test_the_import_check_sees_relative_and_lazy_imports():
    source = "def f():\n    from .request import RequestScreen\n    from . import help\n    from ..state import View\n"
    found = _screen_modules(_imports(TUI / "screens" / "batch.py", source))
    assert found == {"qdebug.tui.screens.request", "qdebug.tui.screens.help"}
    assert _screen_modules(_imports(TUI / "widgets" / "x.py", "from ..screens.batch import BatchScreen\n")) == {"qdebug.tui.screens.batch"}


async def test_the_router_shows_a_trace_and_a_report_on_their_screens(trace, report):
    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        batch = app.screen
        app.files.open(batch, TRACE, "the trace")  # a trace opened from a batch screen: a new request screen
        await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen), what="request screen")
        screen = app.screen
        assert screen.doc.source == "the trace" and screen.doc.trace.generated_text == trace.generated_text
        app.files.open(screen, REPORT, "the report")  # a report: a batch screen on top
        await wait_for(pilot, lambda: isinstance(app.screen, BatchScreen) and app.screen is not batch, what="batch screen")
        assert app.screen.source == "the report"
        app.pop_screen()  # at once, maybe before the batch screen mounted: it must not fail (it did, under load)
        await wait_for(pilot, lambda: app.screen is screen)
        app.files.open(screen, TRACE, "again")  # a trace opened on a request screen takes the place of its document
        await wait_for(pilot, lambda: screen.doc.source == "again", what="trace shown in place")
        assert app.screen is screen
        app.pop_screen()
        await wait_for(pilot, lambda: app.screen is batch)
        depth = len(app.screen_stack)
        app.files.loaded(FileRouter.Loaded(screen, trace, "late"))  # the screen that asked is gone: nothing shows
        await pilot.pause()
        assert len(app.screen_stack) == depth and app.screen is batch


async def test_a_batch_screen_closed_before_it_mounts_does_not_fail(report):
    """Esc pressed the moment a report opens: the screen leaves before its on_mount ran, and the app goes on."""
    from qdebug.tui.screens.batch import BatchScreen

    app = build_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        first = app.screen
        for _ in range(5):
            screen = BatchScreen(report, files=app.files, source="again")
            app.push_screen(screen)
            app.pop_screen()  # before the screen's mount messages are processed
        await pilot.pause()
        assert app.screen is first and app.is_running
