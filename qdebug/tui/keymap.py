"""The user's keymap, `~/.config/qdebug/keys.toml`: binding id → key(s), as Posting and Harlequin allow.

    [keys]
    next = "j"
    continue = "ctrl+n,f5"

A bad file never stops the debugger: the defaults stay and the message line says what was wrong.
"""

from __future__ import annotations

import os
from pathlib import Path


def keymap_path() -> Path:
    """Where the keymap lives: $QDEBUG_KEYS, else $XDG_CONFIG_HOME/qdebug/keys.toml, else ~/.config/qdebug/keys.toml."""
    if os.environ.get("QDEBUG_KEYS"):
        return Path(os.environ["QDEBUG_KEYS"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "qdebug" / "keys.toml"


# A keymap is a few lines; anything far bigger is not one (and a deep nest of arrays overflows tomllib's recursion).
MAX_BYTES = 64 * 1024


def _key_name(key: str) -> str:
    """One key as Textual names it ("[" and "left_square_bracket" are the same key)."""
    key = key.strip()
    if len(key) != 1:
        return key
    from textual.keys import _character_to_key  # Textual's own mapping; private, so fall back to the key as given

    try:
        return _character_to_key(key)
    except Exception:
        return key


def _clash(keymap: dict[str, str], defaults: dict[str, str]) -> str | None:
    """"j: next and quit" when, after the user's keymap, one key would act for two bindings (one would be unreachable)."""
    owner: dict[str, str] = {}
    for action, keys in {**defaults, **keymap}.items():
        for key in map(_key_name, keys.split(",")):
            if key in owner and owner[key] != action:
                return f"{key}: {owner[key]} and {action}"
            owner[key] = action
    return None


def load_keymap(path: Path, known: dict[str, str], defaults: dict[str, str] | None = None) -> tuple[dict[str, str], str | None]:
    """(binding id → keys, None) from `path`, or ({}, one-line error). `known`: binding id → what it does;
    `defaults`: binding id → its default keys (a user key that takes another binding's key is refused)."""
    if not path.is_file():
        return {}, None
    import tomllib  # here: most users have no keymap, and the first frame need not wait for the TOML parser

    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
        if len(raw) > MAX_BYTES:
            return {}, f"{path}: over {MAX_BYTES // 1024} KiB, not a keymap; using the default keys"
        data = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        return {}, f"{path}: nested too deeply to read; using the default keys"
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
    clash = _clash(keymap, defaults or {})
    if clash is not None:
        return {}, f"{path}: one key for two actions ({clash}): one would be unreachable; using the default keys"
    return keymap, None


def key_label(app, binding) -> str:
    """The key shown for `binding`, after the user's keymap."""
    from textual.binding import Binding

    keys = app._keymap.get(binding.id) if binding.id else None
    first = (keys or binding.key).split(",")[0].strip()
    return app.get_key_display(Binding(first, binding.action, binding.description))
