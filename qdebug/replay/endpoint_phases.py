"""The phases of an endpoint replay and what each did about the server's caches, stated exactly: which phase was sent
fresh cache identities, which ran with production caching, and when the server's caches were not the client's to
control (a server that is not vLLM). The report's `phases` and `engine_caches_said` come from here."""

from __future__ import annotations

from .endpoint import NOT_SENT, REFERENCE, WARM, EndpointRun

# How one phase met the server's caches.
ISOLATED = "fresh"  # vLLM: a new uuid per media part and a cache_salt per request, so no entry is shared with another run
PRODUCTION = "production"  # vLLM: no salt, no uuid: every cache keyed by content, read as for any request
UNCONTROLLED = "uncontrolled"  # not vLLM: nothing sent about caches; the server caches as it does

CACHING_SAID = {
    ISOLATED: "fresh identities and salt (no cache entry shared with another run)",
    PRODUCTION: "production caching (no salt, no uuid: prefix, encoder and processor caches read as for any request)",
    UNCONTROLLED: "caches not controlled: the server is not vLLM",
}


def phase_names(run: EndpointRun) -> list[str]:
    """The phases this run sent, in order: `reference`, `burst-1`…, `warm` (when it ran)."""
    return [REFERENCE, *(f"burst-{k + 1}" for k in range(len(run.bursts))), *((WARM,) if run.warms and run.warm else ())]


def caching(run: EndpointRun, phase: str) -> str:
    """How `phase` met the server's caches: ISOLATED, PRODUCTION or UNCONTROLLED."""
    if run.engine_caches == NOT_SENT:
        return UNCONTROLLED
    return ISOLATED if run.fresh(phase) else PRODUCTION


def phases_json(run: EndpointRun) -> list[dict]:
    """The report's `phases`: each phase's name, caching and that in words."""
    return [{"phase": p, "caching": caching(run, p), "said": CACHING_SAID[caching(run, p)]} for p in phase_names(run)]


def caches_said(run: EndpointRun) -> str:
    """The report's `engine_caches_said`: the phases grouped by their caching, e.g. "engine caches: reference, burst-1:
    fresh identities and salt (…); warm: production caching (…)"."""
    if run.engine_caches == NOT_SENT:
        return ("engine caches: not controlled: the server is not vLLM (its /v1/models does not list the model owned_by vllm), "
                "so no cache field was sent and no warm phase ran; each phase met whatever the server caches")
    groups: dict[str, list[str]] = {}
    for p in phase_names(run):
        groups.setdefault(caching(run, p), []).append(p)
    said = "; ".join(f"{', '.join(names)}: {CACHING_SAID[how]}" for how, names in groups.items())
    return f"engine caches: {said}"
