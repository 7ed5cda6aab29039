"""The documentation's option tables (README.md and docs/): whole tables, each option once per table, and every option
one its command's `--help` lists."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from qdebug.cli import app
from tests.docs_text import ROOT, documentation_files

COMMAND = re.compile(r"`qdebug ([a-z][a-z ]*)")
OPTION = re.compile(r"`(--[a-z0-9][a-z0-9-]*)")


def _command_paths() -> set[tuple[str, ...]]:
    """Every command path of the Typer app: ("attn",), ("demo", "train"), ..."""
    paths, todo = set(), [((), typer.main.get_command(app))]
    while todo:
        path, command = todo.pop()
        paths.add(path)
        todo += [((*path, name), sub) for name, sub in getattr(command, "commands", {}).items()]
    return paths


def _heading_command(heading: str, known: set[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The command a heading names first (`### \\`qdebug export onnx\\` / ...` → ("export", "onnx")), if any."""
    found = COMMAND.search(heading)
    if found is None:
        return None
    words = tuple(found.group(1).split())
    return max((words[:n] for n in range(1, len(words) + 1) if words[:n] in known), key=len, default=None)


def _tables() -> list[tuple[str, tuple[str, ...] | None, list[str]]]:
    """(file:first line, command of the section, lines) of every block of consecutive `|` lines: a heading that names
    a command sets it for its section, deeper headings keep it, a heading as high that names none ends it."""
    known = _command_paths()
    blocks = []
    for path in documentation_files():
        command, level, block, fence = None, 0, None, False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            fence = fence != line.strip().startswith("```")
            heading = re.match(r"(#+) ", line) if not fence else None
            if heading:
                depth, named = len(heading.group(1)), _heading_command(line, known)
                if named is not None:
                    command, level = named, depth
                elif depth <= level:
                    command, level = None, 0
            if line.startswith("|"):
                if block is None:
                    block = (f"{path.relative_to(ROOT)}:{number}", command, [])
                    blocks.append(block)
                block[2].append(line)
            else:
                block = None
    return blocks


def _cells(row: str) -> list[str]:
    """A table row's cells (`\\|` inside a cell is a pipe, not a border)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def test_every_table_has_its_header_and_separator():
    blocks = _tables()
    assert blocks
    for where, _command, lines in blocks:
        # a blank line inside a table leaves rows with no header: Markdown then draws them as text
        assert len(lines) >= 2 and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[1].replace(" ", "")), f"{where}: a table without its header"
        width = len(_cells(lines[0]))
        for offset, row in enumerate(lines[2:], 2):
            assert len(_cells(row)) == width, f"{where}+{offset}: {len(_cells(row))} cells, the header has {width}"


def test_option_tables_list_each_option_once_and_only_options_the_command_has():
    runner = CliRunner()
    tables = [(n, c, lines) for n, c, lines in _tables() if _cells(lines[0])[0] == "option"]
    assert {c for _n, c, _l in tables} >= {("attn",), ("replay",)}
    for where, command, lines in tables:
        assert command is not None, f"{where}: an option table outside a command's section"
        helped = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "240", "TERMINAL_WIDTH": "240"})
        assert helped.exit_code == 0, helped.output
        seen: dict[str, int] = {}
        for offset, row in enumerate(lines[2:], 2):
            options = OPTION.findall(_cells(row)[0])
            assert options, f"{where}+{offset}: a row that names no option"
            for option in options:
                assert option not in seen, f"{where}+{offset}: {option} already in this table at row {seen[option]}"
                seen[option] = offset
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", helped.output), \
                    f"{where}+{offset}: {option} is not an option of `qdebug {' '.join(command)}`"
