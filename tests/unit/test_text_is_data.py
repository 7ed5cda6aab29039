"""One rule for text: what reaches Rich or Textual is a literal, a number, or data made safe (`data()`, `shown()`).

Read from the sources of every module that shows text (cli.py, render/, commands/, tui/). A *display call* is a call
that puts text on a screen: Rich's and Textual's (`Text`, `Panel`, `Table`, `Static`, `Label`, `.print`,
`.add_row`, `.update`, `.notify`, `.append`, ...), `typer.echo`, and a text keyword or attribute (`title=`,
`caption=`, `.border_title = `). Every text argument of one is checked:

- a literal (the author's own words) and a number (a numeric literal, a value formatted as a number such as
  `{n:,}` or `{x:.2f}`, `len()`, arithmetic) are safe;
- data made safe is safe: `data(...)` (a `Text`, never markup, hidden characters escaped) anywhere; `shown(...)` and
  `{x!r}` (a plain string, hidden characters escaped) only where nothing reads markup (`Text(...)`, `.append`,
  `typer.echo`, a call with `markup=False`), since Textual, panel titles and Textual's console read a `str` as markup;
- anything else (a field read such as `r.id` or `cell["donor"]`, or an f-string, `+`, `%`, `.format` or `.join`
  interpolating one, directly or through a local name assigned from one) is data from a capture, a log, a server or a
  trace, and fails the test.

Besides: every Console is made with markup=False and emoji=False, and nothing parses markup on purpose
(`from_markup`, `markup=True`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCOPE = [ROOT / "qdebug" / "cli.py", *(p for d in ("render", "commands", "tui") for p in sorted((ROOT / "qdebug" / d).rglob("*.py")))]

# calls whose text is read as markup somewhere: Textual widgets and tables, panel titles, Rich renderables that Textual's
# console draws (a `str` cell of a Rich Table inside the TUI is markup)
MARKUP_CALLS = {"print", "log", "add_row", "add_column", "add_columns", "update", "notify", "Static", "Label", "Panel", "Table", "Rule",
                "Tree", "status"}
# calls that never read markup but put the text on a terminal as it is (control characters and bidi overrides too)
PLAIN_CALLS = {"Text", "append", "assemble", "echo"}
TEXT_KEYWORDS = {"title", "subtitle", "caption", "description"}
TEXT_ATTRIBUTES = {"border_title", "border_subtitle", "title", "sub_title", "caption"}
ESCAPERS = {"data"}  # a Text: safe anywhere
PLAIN_ESCAPERS = {"shown"}  # a str, hidden characters escaped: safe where nothing reads markup
NUMERIC_CALLS = {"len", "int", "float", "round", "abs", "sum", "ord"}
NUMERIC_SPEC_ENDS = tuple("bcdeEfFgGnoxX%,")


def _functions_returning(kinds: set[str]) -> frozenset[str]:
    """The names of qdebug's functions whose return annotation is one of `kinds`."""
    names = set()
    for path in (ROOT / "qdebug").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None and ast.unparse(node.returns) in kinds:
                names.add(node.name)
    return frozenset(names)


# functions that say they return text (`-> str`, `-> list[str]`, ...): what they return is built from their arguments,
# data until it is escaped where it is shown
TEXT_FUNCTIONS = _functions_returning({"str", "str | None", "Optional[str]", "list[str]", "tuple[str, ...]", "tuple[str, str]", "Iterable[str]",
                                       "Iterator[str]"}) - ESCAPERS - PLAIN_ESCAPERS
# functions that return a Rich Text (its `.append` is a display call, not a list's)
RICH_TEXT_FUNCTIONS = _functions_returning({"Text"}) | {"Text", "data", "assemble"}
RENDERABLES = {"Text", "RenderableType", "Group", "Table", "Panel", "ConsoleRenderable", "Content"}


def _renderable_attributes() -> frozenset[str]:
    """Fields of qdebug's classes annotated as a Rich renderable (and never as anything else): reading one reads no data."""
    kinds: dict[str, set[str]] = {}
    for path in (ROOT / "qdebug").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        kinds.setdefault(item.target.id, set()).add(ast.unparse(item.annotation))
    return frozenset(name for name, annotations in kinds.items() if annotations <= RENDERABLES)


RENDERABLE_ATTRIBUTES = _renderable_attributes()


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _own_nodes(fn: ast.AST):
    """The nodes of one function (or module) body, not those of the functions and classes inside it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


@dataclass
class Scope:
    """The assignments of one function (or the module): a local name is as safe as everything assigned to it."""

    parent: "Scope | None" = None
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    numeric_names: set[str] = field(default_factory=set)
    str_params: set[str] = field(default_factory=set)
    text_params: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, fn: ast.AST, parent: "Scope | None" = None) -> "Scope":
        scope = cls(parent)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
                annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if annotation in ("int", "float", "int | None", "float | None"):
                    scope.numeric_names.add(arg.arg)
                elif "str" in annotation:
                    scope.str_params.add(arg.arg)  # text a caller passes: data, unless shown as a literal's would be
                elif annotation == "Text":
                    scope.text_params.add(arg.arg)
        for node in _own_nodes(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    scope._bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                scope._bind(node.target, node.value)
            elif isinstance(node, (ast.For, ast.comprehension)):
                scope._bind_loop(node.target, node.iter)
        return scope

    def lookup(self, name: str) -> tuple[str, list[ast.expr]]:
        """('number' | 'str param' | 'assigned' | 'unknown', what was assigned): the nearest scope that binds `name`."""
        if name in self.numeric_names:
            return "number", []
        if name in self.str_params:
            return "str param", []
        if name in self.text_params:
            return "text param", []
        if name in self.assigned:
            return "assigned", self.assigned[name]
        return self.parent.lookup(name) if self.parent is not None else ("unknown", [])

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, ast.Call):
                return  # a helper's results unpacked: what it built is checked where it built it
            items = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for k, t in enumerate(target.elts):
                self._bind(t, items[k] if items else ast.Subscript(value, ast.Constant(k)))

    def _bind_loop(self, target: ast.expr, iterable: ast.expr) -> None:
        """A loop's target: a number over range(), enumerate's index; each element of a literal tuple or list; an item
        of another iterable as safe as the iterable's items (a record unpacked into names: its fields, data)."""
        name = _name(iterable.func) if isinstance(iterable, ast.Call) else ""
        if name == "range":
            self.numeric_names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
        elif name == "enumerate" and isinstance(target, ast.Tuple) and len(target.elts) == 2 and iterable.args:
            self.numeric_names.update(t.id for t in ast.walk(target.elts[0]) if isinstance(t, ast.Name))
            self._bind_loop(target.elts[1], iterable.args[0])
        elif name in ("zip", "sorted", "reversed") and iterable.args:
            parts = iterable.args if name == "zip" else iterable.args[:1]
            if name == "zip" and isinstance(target, ast.Tuple) and len(target.elts) == len(parts):
                for t, part in zip(target.elts, parts):
                    self._bind_loop(t, part)
            else:
                self._bind_loop(target, parts[0])
        elif isinstance(iterable, (ast.Tuple, ast.List, ast.Set)) and isinstance(target, ast.Name):
            for element in iterable.elts:
                self._bind(target, element)
        elif isinstance(iterable, ast.Call) and isinstance(target, ast.Name):
            if name in TEXT_FUNCTIONS:
                self._bind(target, iterable)  # a line of the text a function built: data until escaped
            # else one item a call yields (a renderable, a record): its fields are reads, checked where read
        else:
            self._bind(target, ast.Subscript(iterable, ast.Constant(0)))  # an item: as safe as what holds it


class Checker:
    """The unsafe text arguments of one file's display calls."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.problems: list[str] = []

    def run(self) -> list[str]:
        self._walk(self.tree, Scope.of(self.tree))
        return self.problems

    def _walk(self, node: ast.AST, scope: Scope) -> None:
        for child in ast.iter_child_nodes(node):
            inner = Scope.of(child, scope) if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            if isinstance(child, ast.Call):
                self._call(child, inner)
            elif isinstance(child, ast.Assign):
                for target in child.targets:
                    if isinstance(target, ast.Attribute) and target.attr in TEXT_ATTRIBUTES:
                        self._check(child.value, scope, markup=True, where=f".{target.attr} =")
            elif isinstance(child, ast.Return) and child.value is not None and isinstance(node, ast.FunctionDef) and node.name == "render":
                self._check(child.value, scope, markup=True, where="render() returns")  # a widget's str render is markup
            self._walk(child, inner)

    def _call(self, call: ast.Call, scope: Scope) -> None:
        name = _name(call.func)
        no_markup = any(k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False for k in call.keywords)
        if name in MARKUP_CALLS or name in PLAIN_CALLS:
            if name == "echo" and not (isinstance(call.func, ast.Attribute) and _name(call.func.value) == "typer"):
                return
            if name == "print" and not isinstance(call.func, ast.Attribute):
                return  # Python's print: plain output (JSON), never Rich
            if name == "append" and not self._is_text(call.func, scope):
                return  # a list's: lines or cells put in it are checked where they are shown (a function returning them says str)
            plain = name in PLAIN_CALLS or no_markup
            texts = call.args if name in ("print", "add_row", "add_columns", "assemble", "log") else call.args[:1]  # Text(text, style): the text
            for arg in texts:
                self._check(arg, scope, markup=not plain, where=f"{name}(...)")
        for kw in call.keywords:
            if kw.arg in TEXT_KEYWORDS and (name in MARKUP_CALLS or name in PLAIN_CALLS):
                self._check(kw.value, scope, markup=not no_markup or kw.arg in ("title", "subtitle"), where=f"{kw.arg}=")

    @staticmethod
    def _is_text(func: ast.expr, scope: Scope) -> bool:
        """Whether `x.append` is a Rich Text's (x made by Text(), data() or a function that says it returns a Text, or a
        parameter annotated Text), not a list's."""
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if not isinstance(receiver, ast.Name):
            return False
        how, values = scope.lookup(receiver.id)
        if how == "text param":
            return True
        return how == "assigned" and any(isinstance(v, ast.Call) and _name(v.func) in RICH_TEXT_FUNCTIONS for v in values)

    def _check(self, expr: ast.expr, scope: Scope, markup: bool, where: str) -> None:
        bad = self._unsafe(expr, scope, markup, depth=0)
        if bad is not None:
            self.problems.append(f"{_where(self.path)}:{expr.lineno}: {where} shows {ast.unparse(bad)!s:.80}"
                                 f" (in {ast.unparse(expr)!s:.100}): wrap it in data(...)" + ("" if markup else " or shown(...)"))

    def _literal(self, e: ast.expr, scope: Scope, depth: int = 0) -> bool:
        """Whether `e` is the author's own constant (a literal, or data() already escaped), a literal tuple, list or dict of
        them, or a name only bound to one."""
        if depth > 6:
            return False
        if isinstance(e, ast.Constant) or (isinstance(e, ast.Call) and _name(e.func) in ESCAPERS):
            return True
        if isinstance(e, ast.IfExp):
            return self._literal(e.body, scope, depth + 1) and self._literal(e.orelse, scope, depth + 1)
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return all(self._literal(x, scope, depth + 1) for x in e.elts)
        if isinstance(e, ast.Dict):
            return all(self._literal(x, scope, depth + 1) for x in [*e.values, *(k for k in e.keys if k is not None)])
        if isinstance(e, ast.Name):
            how, values = scope.lookup(e.id)
            return how == "assigned" and all(self._literal(v, scope, depth + 1) for v in values)
        if isinstance(e, ast.Subscript):
            return self._literal(e.value, scope, depth + 1)
        return False

    def _unsafe(self, e: ast.expr, scope: Scope, markup: bool, depth: int) -> ast.expr | None:
        """The part of `e` that is unescaped data, or None when `e` is safe to show."""
        if depth > 8:
            return None
        again = lambda x: self._unsafe(x, scope, markup, depth + 1)  # noqa: E731
        if isinstance(e, ast.Constant) or self._literal(e, scope):
            return None
        if isinstance(e, ast.Starred):
            return again(e.value)
        if isinstance(e, (ast.List, ast.Tuple)):  # cells spread into a row: each is checked
            for x in e.elts:
                bad = again(x)
                if bad is not None:
                    return bad
            return None
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return again(e.elt)
        if isinstance(e, ast.Call):
            name = _name(e.func)
            if name in ESCAPERS or name in NUMERIC_CALLS:
                return None
            if name in PLAIN_ESCAPERS or name in ("repr", "ascii"):
                return e if markup else None
            if name in TEXT_FUNCTIONS:
                return e  # text a function built (it says it returns str): data until escaped where it is shown
            if name == "str" and e.args:
                return again(e.args[0])
            if name in ("format", "join") and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Constant):
                for part in [*e.args, *(k.value for k in e.keywords)]:
                    bad = again(part)
                    if bad is not None:
                        return bad
                return None
            return None  # another call: a renderable, a helper; what it builds is checked where it builds it
        if isinstance(e, ast.JoinedStr):
            for part in e.values:
                if isinstance(part, ast.FormattedValue):
                    bad = self._formatted(part, scope, markup, depth)
                    if bad is not None:
                        return bad
            return None
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Add) or (isinstance(e.op, ast.Mod) and isinstance(e.left, (ast.Constant, ast.JoinedStr))):
                return again(e.left) or again(e.right)
            if isinstance(e.op, ast.Mult):
                return again(e.left) or again(e.right)  # text repeated is the text
            return None  # arithmetic: a number
        if isinstance(e, ast.UnaryOp):
            return None
        if isinstance(e, ast.IfExp):
            return again(e.body) or again(e.orelse)
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                bad = again(v)
                if bad is not None:
                    return bad
            return None
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Slice):
            return again(e.value)  # a cut of a string: as safe as the string
        if isinstance(e, ast.Attribute) and e.attr in RENDERABLE_ATTRIBUTES:
            return None  # a field that holds a renderable (annotated so), never text
        if isinstance(e, (ast.Attribute, ast.Subscript)):
            return e  # a field of a record: data
        if isinstance(e, ast.Name):
            how, values = scope.lookup(e.id)
            if how == "str param":
                return e
            for value in values:
                if again(value) is not None:
                    return e
            return None
        return None

    def _formatted(self, part: ast.FormattedValue, scope: Scope, markup: bool, depth: int) -> ast.expr | None:
        """The unescaped data of one `{value}` of an f-string, or None."""
        spec = "".join(str(v.value) for v in (part.format_spec.values if part.format_spec else []) if isinstance(v, ast.Constant))
        if spec.endswith(NUMERIC_SPEC_ENDS) and part.conversion == -1:
            return None  # formatted as a number: a str there raises
        if part.conversion in (ord("r"), ord("a")) and not markup:
            return None  # repr escapes every character that is not printable
        value = part.value
        if self._number(value, scope) or self._literal(value, scope):
            return None
        if isinstance(value, ast.Name):  # a local name: safe when all it is ever given is numbers or safe text
            how, values = scope.lookup(value.id)
            escaped = lambda v: isinstance(v, ast.Call) and _name(v.func) in ESCAPERS | PLAIN_ESCAPERS  # noqa: E731
            text_forms = (ast.Constant, ast.JoinedStr, ast.IfExp, ast.BinOp, ast.BoolOp)
            if how == "assigned" and all(self._number(v, scope) or self._literal(v, scope)
                                         or ((isinstance(v, text_forms) or escaped(v)) and self._unsafe(v, scope, markup, depth + 1) is None)
                                         for v in values):
                return None
            return value
        if isinstance(value, ast.Call):
            name = _name(value.func)
            if name in ESCAPERS or name in PLAIN_ESCAPERS or name in ("repr", "ascii"):
                return value if markup else None  # escaped, but a str again: markup where markup is read
            if name == "str" or (name in ("format", "join") and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Constant)):
                return self._unsafe(value, scope, markup, depth + 1)
            return value  # a helper's str: data unless escaped
        if isinstance(value, (ast.JoinedStr, ast.IfExp, ast.BoolOp)) or (isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult))):
            return self._unsafe(value, scope, markup, depth + 1)
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            return None  # arithmetic: a number
        return value

    def _number(self, e: ast.expr, scope: Scope, depth: int = 0) -> bool:
        """Whether `e` is surely a number: a numeric literal, a count, arithmetic on numbers, a name only given those."""
        if depth > 6:
            return False
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        if isinstance(e, ast.Call):
            return _name(e.func) in NUMERIC_CALLS
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, (ast.Add, ast.Mult, ast.Mod)):
                return self._number(e.left, scope, depth + 1) and self._number(e.right, scope, depth + 1)
            return True  # -, /, //, **: only numbers do these
        if isinstance(e, ast.UnaryOp):
            return not isinstance(e.op, ast.Not)
        if isinstance(e, ast.Name):
            how, values = scope.lookup(e.id)
            return how == "number" or (how == "assigned" and bool(values) and all(self._number(v, scope, depth + 1) for v in values))
        return False


def problems_in(paths: list[Path]) -> list[str]:
    """Every unsafe text argument of a display call in these files."""
    return [p for path in paths for p in Checker(path).run()]


def test_every_display_call_shows_data_escaped():
    problems = problems_in(SCOPE)
    assert not problems, f"{len(problems)} place(s) show data unescaped:\n" + "\n".join(problems)


def test_every_console_reads_no_markup_and_nothing_parses_markup_on_purpose():
    bad = []
    for path in SCOPE:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) == "Console":
                given = {k.arg: k.value for k in node.keywords}
                for flag in ("markup", "emoji"):
                    if not (isinstance(given.get(flag), ast.Constant) and given[flag].value is False):
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: Console(...) without {flag}=False")
            if isinstance(node, ast.Call) and _name(node.func) in ("from_markup", "render_markup"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: parses markup")
            if isinstance(node, ast.keyword) and node.arg == "markup" and isinstance(node.value, ast.Constant) and node.value.value is True:
                bad.append(f"{path.relative_to(ROOT)}:{node.value.lineno}: markup=True")
    assert not bad, "\n".join(bad)


def test_the_rule_catches_what_it_should(tmp_path):
    """The checker itself: data unescaped in each display form fails; literals, numbers and escaped data pass."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(r, cell, n: int, rid: str, console, table, text: Text, Static, Panel, typer):\n"
        "    table.add_row(r.id)\n"                                  # 1 a field
        "    table.add_row(cell['donor'])\n"                         # 2 a subscript
        "    console.print(f'request {r.id}')\n"                     # 3 interpolated
        "    Static('ok ' + rid)\n"                                  # 4 a str parameter concatenated
        "    text.append(f'{cell[\"evidence\"]}')\n"                 # 5 Text without escaping
        "    label = r.observed\n"
        "    table.add_row(label)\n"                                 # 6 through a local name
        "    Panel(x, title=f'{r.source}')\n"                        # 7 a panel title
        "    table.add_row(shown(r.id))\n"                           # 8 shown() where markup is read
        "    typer.echo(', '.join(r.donors))\n"                      # 9 joined data on a terminal
        "    table.add_row('literal [b]x[/b]', f'{n} of {len(r.ids)}', f'{r.rows:,}', data(r.id), data(f'a {r.id}'))\n"
        "    text.append(shown(r.id))\n"
        "    text.append(f'{r.prompt!r} {shown(r.id)}')\n"
        "    console.print(shown(r.id), markup=False)\n"
        "    for i, rid2 in enumerate(r.ids):\n"
        "        table.add_row(f'{i + 1}', data(rid2))\n",
        encoding="utf-8")
    found = Checker.__new__(Checker)
    found.path, found.tree, found.problems = sample, ast.parse(sample.read_text()), []
    Checker._walk(found, found.tree, Scope.of(found.tree))
    lines = sorted({int(p.split(":")[1]) for p in found.problems})
    assert lines == [2, 3, 4, 5, 6, 8, 9, 10, 11], found.problems
