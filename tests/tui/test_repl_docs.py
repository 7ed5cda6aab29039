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
