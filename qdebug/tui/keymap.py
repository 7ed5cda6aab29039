"""The user's keymap, `~/.config/qdebug/keys.toml`: binding id → key(s), as Posting and Harlequin allow.

    [keys]
    next = "j"
    continue = "ctrl+n,f5"

A bad file never stops the debugger: the defaults stay and the message line says what was wrong.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path


def keymap_path() -> Path:
    """Where the keymap lives: $QDEBUG_KEYS, else $XDG_CONFIG_HOME/qdebug/keys.toml, else ~/.config/qdebug/keys.toml."""
    if os.environ.get("QDEBUG_KEYS"):
        return Path(os.environ["QDEBUG_KEYS"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "qdebug" / "keys.toml"


def load_keymap(path: Path, known: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(binding id → keys, None) from `path`, or ({}, one-line error). `known`: binding id → what it does."""
    if not path.is_file():
        return {}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, f"{path}: not a readable TOML file ({exc}); using the default keys"
    table = data.get("keys", data)
    if not isinstance(table, dict):
        return {}, f"{path}: [keys] must be a table of action = \"key\"; using the default keys"
    keymap = {}
    for action, keys in table.items():
        if action not in known:
            return {}, f"{path}: unknown action {action!r} (expected one of {', '.join(sorted(known))}); using the default keys"
        if not isinstance(keys, str) or not keys.strip() or any(not k.strip() for k in keys.split(",")):
            return {}, f"{path}: {action} = {keys!r}: expected a key name such as \"j\" or \"ctrl+n,f5\"; using the default keys"
        keymap[action] = ",".join(k.strip() for k in keys.split(","))
    return keymap, None


def key_label(app, binding) -> str:
    """The key shown for `binding`, after the user's keymap."""
    from textual.binding import Binding

    keys = app._keymap.get(binding.id) if binding.id else None
    first = (keys or binding.key).split(",")[0].strip()
    return app.get_key_display(Binding(first, binding.action, binding.description))
