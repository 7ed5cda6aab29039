"""An endpoint replay's cache verdicts, from the engine's own record of every cache read (engine/cache_reads.py: which
positions or items a cache served a request, which request computed them, and whether from the same content, by
qdebug's fingerprints of what each client sent, never the engine's keys).

A request served another's content by a cache in any of its runs is `cache_contaminated`, at the first cache in
pipeline order that did (processor → encoder → prefix → KV connector), naming the reused range and the donor (the
capture's request id when the donor was a request of this replay). Every such read is a `cache_read` error; reads of
a request's own content (the same image sent twice, a shared system prompt) are shown folded, one info line per
request. The warm run's comparison with the cold run is said beside the verdict, whichever way it went: a cache that
served another image is flagged even when the answers cannot show it.
"""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.engine.cache_reads import CacheRead
from qdebug.findings import Finding
from qdebug.replay.endpoint import WARM
from qdebug.shown import shown
from qdebug.vocab import CACHE_KINDS, CacheReuse, FindingKind, Severity, Verdict

from .verdicts import worst

LISTED = 6  # reads listed in one folded line
NAME = 120  # characters of an engine's request name shown


@dataclass(frozen=True)
class RunRead:
    """One read of one run of a request: the phase it was read in and its donor as this replay knows it."""

    phase: str
    read: CacheRead
    donor: str  # the capture's request id when a request of this replay computed it, else the engine's name or id
    donor_phase: str | None  # that request's phase (None: not a request of this replay)

    @property
    def who(self) -> str:
        """The donor in words: `req-01 (reference)`, or the engine's name for a request of no run of this replay."""
        return f"{self.donor} ({self.donor_phase})" if self.donor_phase else self.donor

    def said(self) -> str:
        """`prefix_cache positions 0..63 from req-02 (warm)`."""
        return f"{self.read.cache} {shown(self.read.what(), 120)} from {self.who}"

    def to_json(self) -> dict:
        """As an entry of a request's `cache_reads` in the report's JSON."""
        r = self.read
        return {"phase": self.phase, "cache": str(r.cache), "reuse": str(r.reuse), "what": shown(r.what(), 200),
                "start": r.start, "end": r.end, "positions": r.positions, "item": r.item, "donor": self.donor,
                "donor_phase": self.donor_phase, "origin": shown(r.origin_name or r.origin, NAME), "why": shown(r.why, 300)}


def run_reads(reads: dict[str, dict[str, list[CacheRead]]], origins: dict[str, tuple[str, str]], phases: list[str]) -> dict[str, list[RunRead]]:
    """request id → its runs' reads in phase order; `reads`: phase → request id → reads; `origins`: engine name → (request
    id, phase) of every run of this replay (so a donor is named as the capture names it)."""
    out: dict[str, list[RunRead]] = {}
    for phase in phases:
        for rid, rs in (reads.get(phase) or {}).items():
            for r in rs:
                rid_phase = origins.get(r.origin_name) if r.origin_name else None
                donor, donor_phase = rid_phase if rid_phase else (shown(r.who(), NAME), None)
                out.setdefault(rid, []).append(RunRead(phase, r, donor, donor_phase))
    return out


def first_wrong(wrong: list[RunRead], phases: list[str]) -> RunRead:
    """The read behind the verdict: the first cache in pipeline order that served another's content, the warm run's
    before a cold one's, then the earliest phase and position."""
    return min(wrong, key=lambda w: (CACHE_KINDS.index(w.read.cache), w.phase != WARM, phases.index(w.phase), w.read.start))


def judge_cache_reads(report, by_request: dict[str, list[RunRead]], phases: list[str], fresh: set[str], where: dict[str, str],
                      no_warm: str = "") -> list[Finding]:
    """Set each request's `cache_reads`, and for one served another's content its cache verdict (request, burst runs and
    warm run), `stage` (the cache), `donor` and `cache_read`; returns the findings that tell it. `fresh`: the phases sent
    fresh cache identities; `where`: where each traced warm run parts (analysis.warm.warm_traces); `no_warm`: why no warm
    phase ran ("" when one did)."""
    found: list[Finding] = []
    cold_reads: list[RunRead] = []
    for out in report.requests:
        reads = by_request.get(out.id, [])
        out.cache_reads = [r.to_json() for r in reads]
        cold_reads += [r for r in reads if r.phase in fresh]
        wrong = [r for r in reads if r.read.reuse == CacheReuse.OTHER]
        if wrong:  # the verdict and its story first, then each read of another's content
            found.append(_verdict(out, wrong, first_wrong(wrong, phases), phases, fresh, where, no_warm))
        found += [_wrong_finding(out.id, r) for r in wrong]
        same = [r for r in reads if r.read.reuse == CacheReuse.SAME]
        if same:
            found.append(Finding(FindingKind.CACHE_READ, Severity.INFO, f"request {out.id}: cache reads of its own content "
                                 f"(legitimate): {_listed(same)}", request_id=out.id))
        unverified = [r for r in reads if r.read.reuse == CacheReuse.UNVERIFIED]
        if unverified:
            found.append(Finding(FindingKind.CACHE_READ, Severity.WARNING, f"request {out.id}: {len(unverified)} cache read(s) "
                                 f"could not be judged: {_listed(unverified, why=True)}", request_id=out.id))
    if cold_reads:
        named = sorted({r.phase for r in cold_reads}, key=phases.index)
        found.append(Finding(FindingKind.CACHE_READ, Severity.WARNING,
                             f"{len(cold_reads)} cache read(s) in runs sent fresh cache identities ({', '.join(named)}; first: "
                             f"{cold_reads[0].said()}): the engine served them from its caches all the same, so it keys those "
                             "caches by something other than the uuid and cache_salt a client sends, and those runs were not isolated"))
    return found


def _verdict(out, wrong: list[RunRead], first: RunRead, phases: list[str], fresh: set[str], where: dict[str, str], no_warm: str) -> Finding:
    """Set the cache verdict of a request served another's content; the finding that tells it with its warm run's story."""
    cache = str(first.read.cache)
    out.cache_read = first.to_json()
    out.verdict = worst(out.verdict, Verdict.CACHE_CONTAMINATED)
    if out.verdict == Verdict.CACHE_CONTAMINATED:
        out.stage, out.donor = cache, first.donor
    runs = sorted({r.phase for r in wrong}, key=phases.index)
    for k, phase in enumerate(f"burst-{n + 1}" for n in range(len(out.burst_verdicts or []))):
        mine = [r for r in wrong if r.phase == phase]
        if mine and out.burst_verdicts[k] != Verdict.ERROR:
            out.burst_verdicts[k] = worst(out.burst_verdicts[k], Verdict.CACHE_CONTAMINATED)
            if out.burst_verdicts[k] == Verdict.CACHE_CONTAMINATED:
                out.burst_stages = out.burst_stages or [None] * len(out.burst_verdicts)
                out.burst_stages[k] = str(first_wrong(mine, phases).read.cache)
    warm = [r for r in wrong if r.phase == WARM]
    if warm and out.warm_verdict != Verdict.ERROR:
        w = first_wrong(warm, phases)
        out.warm_verdict, out.warm_stage, out.warm_donor = Verdict.CACHE_CONTAMINATED, str(w.read.cache), w.donor
    said = (f"request {out.id}: {Verdict.CACHE_CONTAMINATED} @{cache}: the {cache} served it {shown(first.read.what(), 120)} computed "
            f"by {first.who} from another's content, in {len(runs)} of its runs ({', '.join(runs)})")
    return Finding(FindingKind.WARM_RUN, Severity.ERROR, said + "; " + _warm_story(out, runs, fresh, where, no_warm),
                   stage=cache, request_id=out.id, donor=first.donor)


def _warm_story(out, runs: list[str], fresh: set[str], where: dict[str, str], no_warm: str) -> str:
    """Its warm run against its cold run, in words: parted or not, and why that cannot clear it."""
    if out.warm_parted is None:
        return no_warm or "its warm run has no answer to compare"
    if out.warm_parted:
        at = where.get(out.id)
        return (f"its warm run parts from its cold run{f' {at}' if at else ''}: it answers {out.warm_answer!r} where alone it "
                f"answers {out.reference!r}")
    cold = [p for p in runs if p in fresh]
    return ("its warm run does not part from its cold run" + (f" (its cold runs were served another's content too: {', '.join(cold)})" if cold else "")
            + ": the engine computed on another's content all the same")


def _wrong_finding(rid: str, r: RunRead) -> Finding:
    """One read of another's content: the request and run, the cache, the range, the donor and why it is not its own."""
    return Finding(FindingKind.CACHE_READ, Severity.ERROR,
                   f"request {rid} ({r.phase} run): the {r.read.cache} served {shown(r.read.what(), 120)} computed by {r.who} "
                   f"from other content: {shown(r.read.why, 300)}", stage=str(r.read.cache), request_id=rid, donor=r.donor)


def _listed(reads: list[RunRead], why: bool = False) -> str:
    """Reads as `warm: prefix_cache positions 0..63 from req-02 (warm); …`, the first LISTED of them."""
    words = [f"{r.phase}: {r.said()}" + (f" ({shown(r.read.why, 120)})" if why else "") for r in reads[:LISTED]]
    return "; ".join(words) + (f"; and {len(reads) - LISTED} more" if len(reads) > LISTED else "")


def provenance_summary(by_request: dict[str, list[RunRead]], where: str) -> dict:
    """The report's `cache_provenance`: reads counted by reuse and by cache, and that in words."""
    reads = [r.read for rs in by_request.values() for r in rs]
    by_reuse = {str(u): sum(1 for r in reads if r.reuse == u) for u in CacheReuse}
    by_cache = {str(c): {str(u): n for u in CacheReuse if (n := sum(1 for r in reads if r.cache == c and r.reuse == u))}
                for c in CACHE_KINDS if any(r.cache == c for r in reads)}
    said = (f"cache provenance: {len(reads)} cache read(s) of this run's requests recorded in {where} "
            f"({by_reuse[CacheReuse.OTHER]} of another's content, {by_reuse[CacheReuse.SAME]} of their own, "
            f"{by_reuse[CacheReuse.UNVERIFIED]} unverified)")
    return {"read": True, "said": said, "reads": len(reads), **by_reuse, "by_cache": by_cache}
