"""One look per event kind and verdict: the glyph, Rich style, matplotlib marker/colour and legend word every view uses."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.vocab import EventKind, StageVerdict, Verdict


@dataclass(frozen=True)
class KindLook:
    """How one event kind is drawn in text (glyph + Rich style) and in a PNG (marker + colour)."""

    glyph: str
    style: str
    marker: str
    colour: str
    label: str
    rank: int  # which glyph wins when two events share one cell; alarms rank highest

    @property
    def alarm(self) -> bool:
        """Whether this kind is a fault (drawn in its own colour, never the request's)."""
        return self.rank >= 4


# Dict order is legend order: the benign pipeline first, then the faults.
EVENT_LOOK: dict[str, KindLook] = {  # EventKind members (a StrEnum), looked up by a log's plain strings
    EventKind.ENCODE_START: KindLook("E", "cyan", "o", "tab:cyan", "encode", 1),
    EventKind.BUFFER_WRITE: KindLook("W", "blue", "s", "tab:blue", "write", 2),
    EventKind.SYNC: KindLook("S", "green", "D", "tab:green", "sync", 2),
    EventKind.FIRST_TOKEN: KindLook("F", "magenta", "|", "tab:purple", "first token", 1),
    EventKind.BUFFER_OVERWRITE: KindLook("O", "bold white on red", "X", "tab:red", "overwritten by a donor", 5),
    EventKind.DESYNC: KindLook("D", "bold yellow", "^", "gold", EventKind.DESYNC, 4),  # the legend word is the kind itself
    EventKind.SHAPE_MISMATCH: KindLook("#", "bold red", "*", "darkred", "shape", 4),
    EventKind.INDEX_OUT_OF_BOUNDS: KindLook("!", "bold red", "P", "darkred", "index", 4),  # its own marker: one per kind
}

UNKNOWN_KIND = KindLook("?", "", ".", "gray", "unknown", 0)

VERDICT_STYLE: dict[str, str] = {  # Verdict members, looked up by plain strings too
    Verdict.OK: "green",
    Verdict.CONTAMINATED: "bold red",
    Verdict.DESYNC: "bold yellow",
    Verdict.DIVERGED: "yellow",
    Verdict.ERROR: "bold magenta",
    Verdict.SERVER_MISMATCH: "bold cyan",
    Verdict.BATCH_DEPENDENT: "bold bright_red",
    Verdict.CACHE_CONTAMINATED: "bold red",
}

# A diff's stages in its PNGs (missing stages are left out of them).
STAGE_VERDICT_COLOUR: dict[str, str] = {  # StageVerdict members, looked up by a StageDiff's plain verdict string
    StageVerdict.OK: "tab:blue",
    StageVerdict.DIVERGED: "tab:red",
    StageVerdict.MISSING: "tab:gray",
}


def kind_look(kind: str) -> KindLook:
    """The look of an event kind (a `?` for a kind this version does not know)."""
    return EVENT_LOOK.get(kind, UNKNOWN_KIND)


def verdict_style(verdict: str) -> str:
    """The Rich style of a verdict (plain for one this version does not know)."""
    return VERDICT_STYLE.get(verdict, "")
