"""docs/commands/repl.md held to the request screen: the keymap's action names are its bindings' ids, every `:` verb
the key table lists is one the command language knows, and each key the table names runs the action it says."""

from __future__ import annotations

import re

from qdebug.tui.command_language import COMMANDS
from qdebug.tui.screens.request import RequestScreen
from tests.docs_text import DOCS

PAGE = " ".join((DOCS / "commands" / "repl.md").read_text(encoding="utf-8").split())


def test_the_keymap_action_names_are_the_screens_binding_ids():
    """The "Action names:" list is exactly the ids a keys.toml may remap."""
    listed = re.search(r"Action names: (.*?)\.", PAGE).group(1)
    names = re.findall(r"`([\w-]+)`", listed)
    assert len(names) == len(set(names))
    assert set(names) == {b.id for b in RequestScreen.BINDINGS if b.id}


def test_the_command_bar_verbs_listed_are_commands():
    """Each verb in the `:` row of the key table is a command of the command bar."""
    row = PAGE.split("| `:` |")[1]
    verbs = {word.split()[0] for word in re.findall(r"`([a-z][^`]*)`", row.split("(history")[0])}
    assert verbs and verbs <= set(COMMANDS), verbs - set(COMMANDS)


def test_the_key_table_keys_run_what_it_says():
    """The single-letter keys of the table are bound to the actions the table gives them."""
    keys = {b.key: b.action for b in RequestScreen.BINDINGS}
    said = {"n": "next", "c": "continue", "b": "breakpoint", "g": "generate", "r": "rerun", "h": "head",
            "t": "toggle_reference", "q": "quit", "colon": "command", "left_square_bracket": "layer(-1)",
            "right_square_bracket": "layer(1)", "question_mark,f1": "help"}
    for key, action in said.items():
        assert keys.get(key) == action, (key, keys.get(key))
    for shown in ["`n` / `c`", "`b`", "`g` / `r`", "`[` `]` / `h`", "`t`", "`:`", "`?` / `q`"]:
        assert f"| {shown} |" in PAGE, shown


GLYPH = {"down": "`↓`", "up": "`↑`", "left": "`←`", "right": "`→`", "shift+left": "(`shift` for every token)",
         "shift+right": "(`shift` for every token)", "shift+down": "`shift+↓`", "shift+up": "`shift+↑`",
         "left_square_bracket": "`[`", "right_square_bracket": "`]`", "colon": "`:`", "question_mark": "`?`",
         "escape": "`Esc`"}


def _key_column() -> str:
    """The first cells of the request screen's key table, joined."""
    table = PAGE.split("| key | does |", 1)[1].split("The batch screen", 1)[0]
    return " ".join(re.findall(r"\| (.+?) \| [^|]", table))


def test_every_request_screen_key_is_in_the_key_table():
    """Each key the request screen binds is in the table (F1, help's second key, in "The first minute")."""
    column = _key_column()
    missing = []
    for binding in RequestScreen.BINDINGS:
        for key in binding.key.split(","):
            if key == "f1":
                assert "`?` / `F1` opens the help" in PAGE
                continue
            if GLYPH.get(key, f"`{key}`") not in column:
                missing.append(key)
    assert not missing, missing


def test_every_batch_screen_key_is_in_the_batch_paragraph():
    """The batch screen paragraph names each key the batch screen binds, and `o` is the offset picture."""
    from qdebug.tui.screens.batch import BatchScreen

    said = PAGE.split("The batch screen", 1)[1].split("## The first minute", 1)[0]
    glyphs = dict(GLYPH, enter="Enter", left_curly_bracket="`{`", right_curly_bracket="`}`")
    missing = [b.key for b in BatchScreen.BINDINGS if glyphs.get(b.key, f"`{b.key}`") not in said]
    assert not missing, missing
    keys = {b.key: b.action for b in BatchScreen.BINDINGS}
    assert keys["o"] == "picture" and "`o` draws the offset timeline as a picture" in said
    assert keys["right_curly_bracket"] == "page('last')" and keys["left_square_bracket"] == "page('previous')"


def test_the_keymap_file_is_found_where_the_page_says(monkeypatch, tmp_path):
    """$QDEBUG_KEYS first, then $XDG_CONFIG_HOME/qdebug/keys.toml, then ~/.config/qdebug/keys.toml."""
    from pathlib import Path

    from qdebug.tui.keymap import keymap_path

    assert ("a keymap file: `$QDEBUG_KEYS` when it is set, else `$XDG_CONFIG_HOME/qdebug/keys.toml`, "
            "else `~/.config/qdebug/keys.toml`") in PAGE
    monkeypatch.setenv("QDEBUG_KEYS", str(tmp_path / "mine.toml"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert keymap_path() == tmp_path / "mine.toml"
    monkeypatch.delenv("QDEBUG_KEYS")
    assert keymap_path() == tmp_path / "xdg" / "qdebug" / "keys.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert keymap_path() == Path(tmp_path / "home" / ".config" / "qdebug" / "keys.toml")


def test_the_stage_list_marks_are_the_pages():
    """The status marks, the breakpoint dot and the ✗ / ! marks the page lists are what a stage line shows."""
    from qdebug.tui.state import StageRow
    from qdebug.tui.widgets.stage_list import row_text

    assert ("(`·` pending, `»` running, `▶` paused here, `✓` done; `●` a breakpoint, `✗` a failed check or an error "
            "finding at that stage, `!` a warning finding)") in PAGE
    for status, mark in (("pending", "·"), ("running", "»"), ("paused", "▶"), ("done", "✓")):
        assert row_text(StageRow("sync", status)).plain.split()[0] == mark, status
    assert row_text(StageRow("sync", "done", breakpoint=True)).plain.startswith("●")
    assert row_text(StageRow("sync", "done", failed=True, warned=True)).plain.rstrip().endswith("✗")
    assert row_text(StageRow("sync", "done", warned=True)).plain.rstrip().endswith("!")


def test_the_terminals_the_page_names_are_asked_for_pixels(monkeypatch):
    """kitty, WezTerm, ghostty, foot and iTerm2 pass the cheap gate before textual-image asks the terminal; a plain
    xterm and a pipe do not; QDEBUG_PIXELS=sixel|tgp|off decides without asking."""
    import sys

    from qdebug.tui import pixels

    assert "(Sixel, the Kitty graphics protocol: kitty, WezTerm, ghostty, foot, iTerm2…)" in PAGE
    assert "`QDEBUG_PIXELS=sixel|tgp|off` overrides the detection" in PAGE
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    for name in ("TERM", "TERM_PROGRAM", "KITTY_WINDOW_ID"):
        monkeypatch.delenv(name, raising=False)
    for variable, value in (("TERM", "xterm-kitty"), ("TERM_PROGRAM", "WezTerm"), ("TERM_PROGRAM", "ghostty"),
                            ("TERM", "foot"), ("TERM_PROGRAM", "iTerm.app")):
        monkeypatch.setenv(variable, value)
        assert pixels._terminal_may_show_pixels(), value
        monkeypatch.delenv(variable)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert not pixels._terminal_may_show_pixels()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setenv("TERM", "xterm-kitty")
    assert not pixels._terminal_may_show_pixels()
    for forced, protocol in (("sixel", "sixel"), ("tgp", "tgp"), ("off", None)):
        monkeypatch.setenv("QDEBUG_PIXELS", forced)
        assert pixels.detect() == protocol


def test_attn_tui_and_replay_tui_open_their_results_in_the_debugger(monkeypatch):
    """"`qdebug attn ... --tui` and `qdebug replay ... --tui` open their results in it": the request screen on attn's
    trace, the batch screen on the replay's report (the app driven headless by Textual's pilot)."""
    import asyncio
    from pathlib import Path

    from typer.testing import CliRunner

    from qdebug.cli import app as cli
    from qdebug.tui.app import QDebugApp
    from qdebug.tui.screens.batch import BatchScreen

    assert "`qdebug attn ... --tui` and `qdebug replay ... --tui` open their results in it" in PAGE
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    seen = []

    def headless(self, *args, **kwargs):
        async def drive():
            async with self.run_test(size=(160, 50)) as pilot:
                for _ in range(50):
                    await pilot.pause(0.05)
                    if isinstance(self.screen, (RequestScreen, BatchScreen)) and self.screen.is_mounted:
                        break
                screen = self.screen
                seen.append((type(screen).__name__, getattr(getattr(screen, "doc", None), "trace", None),
                             getattr(screen, "report", None), self))

        asyncio.run(drive())

    monkeypatch.setattr(QDebugApp, "run", headless)
    runner = CliRunner()
    done = runner.invoke(cli, ["attn", str(sample / "red_circle_top_left.png"), "Describe the image.", "--device", "cpu",
                               "--max-new-tokens", "2", "--tui"])
    assert done.exit_code == 0, done.output
    name, trace, _report, app = seen[-1]
    assert name == "RequestScreen" and trace is app.trace and trace.generated_text.startswith("a red")
    done = runner.invoke(cli, ["replay", str(sample / "burst.log"), "--tui"])
    assert done.exit_code == 1, done.output  # the log's contamination findings
    name, _trace, report, app = seen[-1]
    assert name == "BatchScreen" and report is app.report and [r.id for r in report.requests][:2] == ["41", "42"]
