"""Finding: one thing a check or detector found, as plain data every layer can pass along."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .vocab import FindingKind, Severity


@dataclass
class Finding:
    """A problem (or notable fact) found in a trace, replay, log or diff."""

    kind: FindingKind
    severity: Severity
    message: str
    stage: str | None = None
    request_id: str | None = None
    donor: str | None = None
    layer: int | None = None

    def __post_init__(self) -> None:
        # A kind or severity outside the vocabulary is a bug or a corrupt file: refused here, where it is made.
        self.kind, self.severity = FindingKind(self.kind), Severity(self.severity)

    def to_json(self) -> dict:
        """The finding as a JSON object (all fields, None where unknown)."""
        return asdict(self)
