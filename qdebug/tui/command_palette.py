"""The command palette (Ctrl+P): every command-bar verb and every key of the screen, searchable."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import SystemCommand

from .command_language import COMMANDS, NEEDS_ARG


def _verb(screen, name: str, args: str):
    """A verb without arguments runs at once; one with arguments opens the command bar filled in."""

    def run() -> None:
        from .widgets.command_bar import CommandBar

        bars = screen.query(CommandBar)
        if name in NEEDS_ARG and bars:
            bar = bars.first()
            bar.value = f"{name} "
            bar.cursor_position = len(bar.value)
            screen.set_focus(bar)
        elif hasattr(screen, "run_command"):
            screen.run_command(name)
        elif bars:
            screen.post_message(CommandBar.Entered(name))

    return run


def palette_commands(screen) -> Iterable[SystemCommand]:
    """Commands for the palette opened over `screen`: `:` verbs, then the screen's keys with what they do."""
    from .keymap import key_label

    for name, (args, what) in COMMANDS.items():
        yield SystemCommand(f":{name} {args}".rstrip(), what, _verb(screen, name, args))
    seen = set()
    for binding in getattr(screen, "BINDINGS", []):
        if not binding.description or binding.action in seen or binding.action in ("command", "quit"):
            continue
        seen.add(binding.action)
        label = key_label(screen.app, binding)
        method = getattr(screen, "action_" + binding.action.split("(")[0], None)
        what = ((method.__doc__ or "").strip().splitlines() or [binding.description])[0]
        yield SystemCommand(f"{binding.description}  · key {label}", what, lambda a=binding.action: screen.run_action(a))
