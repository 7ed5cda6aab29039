"""Whose visual rows landed in each request's stream inside the engine, read from the engine's own traces of a
burst (`replay --endpoint URL --engine-traces DIR`), and whether that agrees with the donors the answers name.

The evidence is the local replay's: per burst, every request's rows at its image placeholders in the embeddings
the decoder received (`sync`) against every request's encoder rows (`encode`), compared by cosine
(detectors.contamination); a donor is a request whose rows wholly fill another's stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from qdebug.findings import Finding
from qdebug.replay.engine import encoded_rows, landed_index, landed_rows
from qdebug.vocab import FindingKind, Severity, StageName

from .detectors.contamination import OWN, UNMATCHED, contamination_matrix, donor_of, row_owners


def engine_rows(traces: dict) -> dict[str, tuple[str | None, dict[str, int]]]:
    """request id → (the request whose encoder rows wholly fill its stream in the engine, or None; whose each landed
    row is: request ids, OWN and UNMATCHED with their row counts). Only the rows each run computed are judged: a run
    whose prefix the engine served from a cache is compared at the placeholders after it, against the same rows of
    every request's encoder output (its rows before were not merged in that run, and say nothing of it)."""
    ids = sorted(traces)
    landed = {rid: landed_rows(t) for rid, t in traces.items()}
    encoded = {rid: encoded_rows(t) for rid, t in traces.items()}
    against = {rid: _lined_up(encoded, landed_index(traces[rid])) for rid in ids}
    matrix = [contamination_matrix(ids, {rid: landed[rid]}, against[rid])[k] for k, rid in enumerate(ids)]
    return {rid: (donor_of(ids, matrix, rid), row_owners(rid, ids, landed, against[rid])) for rid in ids}


def _lined_up(encoded: dict, index: list[int] | None) -> dict:
    """Every request's encoder rows at the item rows `index` (a reader's computed placeholders; None: all of them)."""
    if index is None:
        return encoded
    return {d: rows[index] if rows is not None and index and rows.shape[0] > index[-1] else None for d, rows in encoded.items()}


def engine_findings(report, bursts: list[dict]) -> list[Finding]:
    """Findings from the engine's traces of each burst (`bursts[k]`: request id → trace), set against the donors
    the report's answers named (`burst_donors`)."""
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
    return out


def no_evidence_findings(missing: Sequence[tuple[str, str, str]], unreadable: Sequence[tuple[str, str, str, str]],
                         non_finite: Sequence[tuple[str, str, str, str]]) -> list[Finding]:
    """The traces a replay asked for and could not use, each (request id, phase, tag[, why]): `missing` never appeared,
    `unreadable` were there but could not be read, `non_finite` hold NaN or infinity where rows are compared. Each
    request so left is judged by its answers alone in those runs, and said to be; never blamed for rows no one's."""
    out: list[Finding] = []
    if missing:
        who = sorted({rid for rid, _, _ in missing})
        out.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.WARNING,
                           f"{len(missing)} engine trace(s) never appeared (first: {missing[0][2]}): request(s) {', '.join(who[:10])}"
                           + (f" and {len(who) - 10} more" if len(who) > 10 else "")
                           + " carry no engine evidence in those runs (judged by their answers there)",
                           request_id=who[0] if len(who) == 1 else None))
    for rid, phase, tag, why in unreadable:
        out.append(Finding(FindingKind.PARTIAL_COMPARISON, Severity.WARNING,
                           f"the engine trace of {tag} could not be read ({why[:300]}): that request carries no engine evidence in {phase}",
                           request_id=rid))
    for rid, phase, tag, why in non_finite:
        out.append(Finding(FindingKind.NAN_INF, Severity.WARNING,
                           f"the engine trace of {tag} holds non-finite values ({why}): its rows match no request's, so request {rid} "
                           f"carries no engine evidence in {phase} (judged by its answers there, not called contaminated)",
                           stage=StageName.SYNC, request_id=rid))
    return out


def non_finite_rows(trace) -> str:
    """Where an engine trace's compared rows (those that landed at its placeholders, its encoder rows) hold NaN or
    infinity, in words ('' when every one is finite, or it has none)."""
    import torch

    said = []
    for what, rows in (("sync rows", landed_rows(trace)), ("encoder rows", encoded_rows(trace))):
        if rows is not None and rows.numel():
            bad = int((~torch.isfinite(rows.float())).any(dim=-1).sum()) if rows.dim() > 1 else int((~torch.isfinite(rows.float())).sum())
            if bad:
                said.append(f"{bad:,} of {rows.shape[0]:,} {what}")
    return ", ".join(said)


def _named(outcome, burst: int) -> list[str]:
    """The donors one request's answer in one burst names ([]: its own, no one's, or no answer)."""
    if outcome is None or burst >= len(outcome.burst_donors or []):
        return []
    return list(outcome.burst_donors[burst])
