"""Whose visual rows landed in each request's stream inside the engine, read from the engine's own traces of a
burst (`replay --endpoint URL --engine-traces DIR`), and whether that agrees with the donors the answers name.

The evidence is the local replay's: per burst, every request's rows at its image placeholders in the embeddings
the decoder received (`sync`) against every request's encoder rows (`encode`), compared by cosine
(detectors.contamination); a donor is a request whose rows wholly fill another's stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from qdebug.findings import Finding
from qdebug.replay.engine import encoded_rows, landed_rows
from qdebug.vocab import FindingKind, Severity, StageName

from .detectors.contamination import OWN, UNMATCHED, contamination_matrix, donor_of, row_owners


def engine_rows(traces: dict) -> dict[str, tuple[str | None, dict[str, int]]]:
    """request id → (the request whose encoder rows wholly fill its stream in the engine, or None; whose each landed
    row is: request ids, OWN and UNMATCHED with their row counts)."""
    ids = sorted(traces)
    landed = {rid: landed_rows(t) for rid, t in traces.items()}
    encoded = {rid: encoded_rows(t) for rid, t in traces.items()}
    matrix = contamination_matrix(ids, landed, encoded)
    return {rid: (donor_of(ids, matrix, rid), row_owners(rid, ids, landed, encoded)) for rid in ids}


def engine_findings(report, bursts: list[dict], missing: list[str], unreadable: Sequence[tuple[str, str, str]] = ()) -> list[Finding]:
    """Findings from the engine's traces of each burst (`bursts[k]`: request id → trace), set against the donors
    the report's answers named (`burst_donors`); `missing`: the traces that never appeared; `unreadable`: (request id,
    tag, why) of each trace that was there but could not be read (corrupt, or not a file of the folder)."""
    out: list[Finding] = []
    outcomes = {r.id: r for r in report.requests}
    for k, traces in enumerate(bursts):
        for rid, (donor, owners) in sorted(engine_rows(traces).items()):
            others = {o: n for o, n in owners.items() if o not in (OWN, UNMATCHED)}
            total = sum(owners.values())
            if donor is not None:
                out.append(Finding(FindingKind.ENGINE_CONTAMINATION, Severity.ERROR,
                                   f"inside the engine (burst {k + 1}): request {rid}'s stream held request {donor}'s visual rows "
                                   "(its engine trace's sync rows are that request's encoder rows)", stage=StageName.SYNC, request_id=rid, donor=donor))
            elif others or owners.get(UNMATCHED):
                share = ", ".join(f"{n} from {o}" for o, n in owners.items())
                out.append(Finding(FindingKind.ENGINE_CONTAMINATION, Severity.ERROR,
                                   f"inside the engine (burst {k + 1}): request {rid}'s stream held a mix of visual rows ({share}, of {total})",
                                   stage=StageName.SYNC, request_id=rid, donor=next(iter(others), None)))
            named = _named(outcomes.get(rid), k)
            shown = {donor} if donor is not None else set(others)
            if named and not shown & set(named):  # the answer names a donor whose rows the engine never put in this stream
                out.append(Finding(FindingKind.ENGINE_DISAGREEMENT, Severity.WARNING,
                                   f"burst {k + 1}: request {rid}'s answer is {', '.join(named)}'s, but its engine trace shows "
                                   f"{', '.join(sorted(shown)) or 'its own'} rows", stage=StageName.SYNC, request_id=rid, donor=donor))
    if missing:
        out.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.WARNING,
                           f"{len(missing)} engine trace(s) never appeared (first: {missing[0]}): those requests carry no engine evidence"))
    for rid, tag, why in unreadable:
        out.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.WARNING,
                           f"the engine trace of {tag} could not be read ({why[:300]}): that request carries no engine evidence",
                           request_id=rid))
    return out


def _named(outcome, burst: int) -> list[str]:
    """The donors one request's answer in one burst names ([]: its own, no one's, or no answer)."""
    if outcome is None or burst >= len(outcome.burst_donors or []):
        return []
    return list(outcome.burst_donors[burst])
