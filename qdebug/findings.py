"""Finding: one thing a check or detector found, as plain data every layer can pass along."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Finding:
    """A problem (or notable fact) found in a trace, replay, log or diff."""

    kind: str
    severity: str
    message: str
    stage: str | None = None
    request_id: str | None = None
    donor: str | None = None
    layer: int | None = None

    def to_json(self) -> dict:
        """The finding as a JSON object (all fields, None where unknown)."""
        return asdict(self)
