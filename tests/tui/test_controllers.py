"""The request screen's controllers read only what they define or are given: their own attributes, and of the
screen only what their host Protocol declares; the screen implements every host Protocol."""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest

from qdebug.tui.controllers.command import CommandHost
from qdebug.tui.controllers.cursor import CursorHost
from qdebug.tui.controllers.documents import DocHost
from qdebug.tui.controllers.prefetch import PrefetchHost
from qdebug.tui.controllers.replay import ReplayHost, ReplayStatusBar
from qdebug.tui.controllers.run import RunHost
from qdebug.tui.screens.request import RequestScreen

from .conftest import ROOT

CONTROLLERS = ROOT / "qdebug" / "tui" / "controllers"


def _protocol_members(node: ast.ClassDef, protocols: dict[str, ast.ClassDef]) -> set[str]:
    """Names a Protocol class declares: annotated attributes, methods and properties, its base protocols' included."""
    names = set().union(*(_protocol_members(protocols[ast.unparse(b)], protocols) for b in node.bases if ast.unparse(b) in protocols))
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
        elif isinstance(item, ast.FunctionDef):
            names.add(item.name)
    return names


def _self_reads(node: ast.ClassDef, via: tuple[str, ...] = ()) -> set[str]:
    """Attributes read as `self.<via>.NAME` in the class's methods."""
    reads = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
            chain, inner = [sub.attr], sub.value
            while isinstance(inner, ast.Attribute):
                chain.insert(0, inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "self" and tuple(chain[:-1]) == via:
                reads.add(chain[-1])
    return reads


def _defined(node: ast.ClassDef) -> set[str]:
    """What a class defines for itself: methods, class-level fields, nested classes and `self.X = …` anywhere."""
    names = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    for sub in ast.walk(node):
        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(sub, ast.AnnAssign) else []
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.add(t.attr)
    return names


def _host_protocol(node: ast.ClassDef) -> str:
    """The annotation of the controller's `host` (its constructor argument or dataclass field)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.arg) and sub.arg == "host" and sub.annotation is not None:
            return ast.unparse(sub.annotation)
        if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.target.id == "host":
            return ast.unparse(sub.annotation)
    raise AssertionError(f"{node.name} has no annotated host")


def _controllers():
    classes = {}
    for path in sorted(CONTROLLERS.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node
    protocols = {name: n for name, n in classes.items() if any(ast.unparse(b) == "Protocol" for b in n.bases)}
    return [n for name, n in classes.items() if name not in protocols], protocols


def test_every_controller_reads_only_what_it_defines_or_its_host_declares():
    controllers, protocols = _controllers()
    assert {c.name for c in controllers} >= {"RunController", "CommandController", "ReplayController", "Prefetcher", "Cursor",
                                             "DocController"}
    for controller in controllers:
        undefined = _self_reads(controller) - _defined(controller)
        assert not undefined, f"{controller.name} reads self.{', self.'.join(sorted(undefined))} without defining them"
        host = protocols[_host_protocol(controller)]
        undeclared = _self_reads(controller, ("host",)) - _protocol_members(host, protocols)
        assert not undeclared, f"{controller.name} reads host.{', host.'.join(sorted(undeclared))}: not in {host.name}"


def test_the_check_catches_an_undeclared_read():
    node = ast.parse("class C:\n    def __init__(self, host: H):\n        self.host = host\n"
                     "    def f(self):\n        return self.host.secret, self.missing\n").body[0]
    assert _self_reads(node) - _defined(node) == {"missing"}
    assert _self_reads(node, ("host",)) == {"secret"}


@pytest.mark.parametrize("protocol", [RunHost, CommandHost, ReplayHost, PrefetchHost, CursorHost, DocHost], ids=lambda p: p.__name__)
def test_the_request_screen_implements_every_host_protocol(protocol):
    screen = RequestScreen(files=SimpleNamespace(show_report=lambda report, source: None))
    declared = {n for n in vars(protocol) if not n.startswith("_")} | set(getattr(protocol, "__annotations__", {}))
    missing = sorted(n for n in declared if n not in vars(screen) and not hasattr(RequestScreen, n))
    assert not missing, f"RequestScreen lacks {missing} of {protocol.__name__}"


def test_the_request_panels_implement_the_replay_status_bar():
    from qdebug.tui.request_panels import RequestPanels

    missing = sorted(n for n in vars(ReplayStatusBar) if not n.startswith("_") and not hasattr(RequestPanels, n))
    assert not missing, f"RequestPanels lacks {missing} of ReplayStatusBar"
