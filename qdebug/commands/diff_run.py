"""The result of `qdebug diff`: one Comparison per prompt order, and the `--json` document over them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from qdebug.analysis.diff import DiffResult
    from qdebug.trace.schema import Trace


class Comparison(NamedTuple):
    """One comparison of `qdebug diff`: which prompt order, its DiffResult, and the two traces compared."""

    order: str  # image-first | text-first | audio-first, or `traces` for two saved traces
    result: DiffResult
    trace_a: Trace
    trace_b: Trace


@dataclass(frozen=True)
class DiffRun:
    """What `qdebug diff` produced: one comparison, or one per order for --order both."""

    comparisons: list[Comparison]

    @property
    def parted(self) -> bool:
        """Whether any comparison found a diverging stage or different generated texts (exit status 1)."""
        return any(c.result.first_divergence is not None or c.result.a_text != c.result.b_text for c in self.comparisons)

    def to_json(self) -> dict:
        """The `--json` document: one comparison, or `comparisons` for --order both."""
        docs = [{"order": c.order, **c.result.to_json()} for c in self.comparisons]
        if len(docs) == 1:
            return docs[0]
        # Top level speaks for both orders: the first order that parts (else the first), every order's findings.
        lead = next((d for d in docs if d["first_divergence"] is not None or not d.get("texts_agree", True)), docs[0])
        return {
            "comparisons": docs,
            **{k: lead[k] for k in ("stages", "first_divergence", "steps")},
            "findings": [{**f, "order": d["order"]} for d in docs for f in d["findings"]],
            "order": "both",
            "first_divergence_order": lead["order"] if lead["first_divergence"] is not None else None,
            "orders": {d["order"]: {"first_divergence": d["first_divergence"], "texts_agree": d.get("texts_agree")} for d in docs},
        }
