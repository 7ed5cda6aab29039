"""qdebug's vocabulary: one `StrEnum` per set of words that JSON, the CLI, the TUI and the tests share.

Members are `str`s: they compare equal to, hash like and JSON-serialise as their values, so documents
written with them are byte-identical to documents written with the plain strings.
"""

from __future__ import annotations

from enum import StrEnum


class StageName(StrEnum):
    """Pipeline stages with a fixed name; decoder layers and generation steps are `layer.N` / `step.K`."""

    PREPROCESS = "preprocess"
    ENCODE = "encode"
    SYNC = "sync"
    LOGITS = "logits"


def layer_stage(layer: int) -> str:
    """The stage name of decoder layer `layer`."""
    return f"layer.{layer}"


def step_stage(step: int) -> str:
    """The stage name of generation step `step`."""
    return f"step.{step}"


EVERY_STEP = "step.*"  # a breakpoint that matches every generation step's stage


def is_layer_stage(name: str) -> bool:
    """Whether `name` is a decoder layer's stage (`layer.N`)."""
    return name.startswith("layer.")


def is_step_stage(name: str) -> bool:
    """Whether `name` is a generation step's stage (`step.K`)."""
    return name.startswith("step.")


def stage_number(name: str) -> int:
    """N of a `layer.N` stage name, K of a `step.K` one."""
    return int(name.split(".")[1])


class EventKind(StrEnum):
    """What happened to one request at one time (replays and runtime logs alike).

    Order matters: a log index stores a kind as its position here, so new kinds go at the end.
    """

    ENCODE_START = "encode_start"
    BUFFER_WRITE = "buffer_write"
    BUFFER_OVERWRITE = "buffer_overwrite"
    SYNC = "stitch"  # the sync step; the value predates the name and stays: documents, logs and indexes hold it
    DESYNC = "desync"
    SHAPE_MISMATCH = "shape_mismatch"
    INDEX_OUT_OF_BOUNDS = "index_out_of_bounds"
    FIRST_TOKEN = "first_token"


class EventOrigin(StrEnum):
    """Who reported an event: the run itself (a log line, the recorder, a buffer), or an injected fault about itself."""

    OBSERVED = "observed"
    FAULT = "fault"  # the fault's own word: a label for reports, never evidence (offsets and verdicts are measured)


class Verdict(StrEnum):
    """One request's verdict in a replay, a runtime log or an endpoint burst."""

    OK = "ok"
    CONTAMINATED = "contaminated"
    DESYNC = "desync"
    DIVERGED = "diverged"
    ERROR = "error"
    SERVER_MISMATCH = "server_mismatch"  # an engine's isolated run is not the model's (endpoint replays with --model)
    BATCH_DEPENDENT = "batch_dependent"  # an engine's run in a burst parts from its isolated run: its batch changed it
    # an engine's warm run (production caching) was served another request's media or KV by a cache: the engine's own
    # record of who computed what it read, judged by qdebug's fingerprints of what each client sent (CacheKind: where)
    CACHE_CONTAMINATED = "cache_contaminated"


# Verdicts only an endpoint replay gives (a runtime log never does: its index stores none of them).
ENDPOINT_VERDICTS: tuple[Verdict, ...] = (Verdict.SERVER_MISMATCH, Verdict.BATCH_DEPENDENT, Verdict.CACHE_CONTAMINATED)


class StageVerdict(StrEnum):
    """One stage's verdict in a diff of two traces."""

    OK = "ok"
    DIVERGED = "diverged"
    MISSING = "missing"


class Severity(StrEnum):
    """How bad a finding is."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class FindingKind(StrEnum):
    """What a finding is about (a check's kind, when a trace check fails, is one of these too)."""

    # trace checks and input checks
    CHECK_FAILED = "check_failed"
    NAN_INF = "nan_inf"
    FINGERPRINT = "fingerprint"
    SHAPE_MISMATCH = "shape_mismatch"
    DESYNC = "desync"
    FLAT_IMAGE = "flat_image"
    PROMPT_TOO_LONG = "prompt_too_long"
    # replays, runtime logs, endpoint bursts
    CONTAMINATION = "contamination"
    OVERWRITE = "overwrite"
    MIXED_ROWS = "mixed_rows"
    INDEX_OUT_OF_BOUNDS = "index_out_of_bounds"
    INJECTED = "injected"
    REQUEST_ERROR = "request_error"
    DIVERGED = "diverged"
    OBSERVED_CONTAMINATION = "observed_contamination"
    OBSERVED_DIVERGED = "observed_diverged"
    NONDETERMINISM = "nondeterminism"
    SERVER_MISMATCH = "server_mismatch"
    DETOKENIZATION = "detokenization"  # two answers with the same words that differ only in whitespace
    LOG_GREW = "log_grew"  # a runtime log was appended to while read: read up to its size at the start
    LOG_SHRANK = "log_shrank"  # a runtime log was truncated while read (copytruncate): the report is partial
    # diffs
    FIRST_DIVERGENCE = "first_divergence"
    GENERATION_DIVERGED = "generation_diverged"
    PARTIAL_COMPARISON = "partial_comparison"
    LAYOUT = "layout"
    LAYOUT_AMBIGUOUS = "layout_ambiguous"
    DEEPSTACK = "deepstack"
    POSITION_IDS = "position_ids"
    # exported models
    EXPORT_LAYER = "export_layer"
    EXPORT_VISION = "export_vision"
    EXPORT_HEAD = "export_head"
    EXPORT_WEIGHT = "export_weight"
    # serving engines
    ENGINE_ANSWER = "engine_answer"  # the answer a client received is not the text of the tokens the engine traced
    ENGINE_CONTAMINATION = "engine_contamination"  # inside the engine, a request's stream held another request's visual rows
    ENGINE_DISAGREEMENT = "engine_disagreement"  # the donor the answers name is not the one the engine's rows show
    BATCH_DEPENDENT = "batch_dependent"  # inside the engine, a request's run in a burst parts from its run alone
    ENGINE_BATCHING = "engine_batching"  # how the engine actually batched a burst (its encoder calls and steps)
    BURST_NOT_BATCHED = "burst_not_batched"  # a burst whose requests never shared an encoder call or a step
    # engine caches (endpoint replays against vLLM): one read a cache served a request (another's content: an error; the
    # same content, folded per request: info), and a request's warm run (production caching) against its cold runs
    CACHE_READ = "cache_read"
    WARM_RUN = "warm_run"


EVENT_KINDS: tuple[EventKind, ...] = tuple(EventKind)
VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
# How bad a request's verdict is: where pieces of evidence disagree, the higher rank wins. A runtime log never
# says `diverged` (it holds no answers), so its index stores the other four, in this order, as 0..3.
# An engine's own mismatch, a batch-dependent run and a cache's wrong read rank above a failed request and below a
# broken stream.
VERDICT_RANK: dict[Verdict, int] = {Verdict.OK: 0, Verdict.DIVERGED: 1, Verdict.ERROR: 2, Verdict.SERVER_MISMATCH: 3,
                                    Verdict.BATCH_DEPENDENT: 4, Verdict.CACHE_CONTAMINATED: 5, Verdict.DESYNC: 6,
                                    Verdict.CONTAMINATED: 7}
SEVERITIES: tuple[Severity, ...] = tuple(Severity)


class WatchCheck(StrEnum):
    """The checks of the vLLM plugin's watch mode (`QDEBUG_VLLM_WATCH=1`): the `check` label of its Prometheus series
    and the `check=` field of its findings log. Stable: alert rules and scripts use them."""

    PLACEMENT = "placement"  # every request: the rows at its placeholders are its own encoder rows
    COUNTS = "counts"  # every request: placeholder tokens == encoder rows == the grid's count, per item
    POSITIONS = "positions"  # sampled: the MRoPE ids the engine used == the model's own rope index
    ENCODER_BATCH = "encoder_batch"  # sampled encoder calls of >= 2 items: one item re-encoded alone agrees
    LAYOUT = "layout"  # sampled steps: each decoder kernel's q/k/v rows arrive token-major
    LOGITS = "logits"  # sampled steps: no NaN/Inf, no request's logits row a copy of another's
    CACHE = "cache"  # every request: each cache read served what was computed from its own content (engine/cache_reads.py)


class WatchOutcome(StrEnum):
    """What one run of a watch check found: a `violation` of its invariant, or an `error` (the check itself raised;
    the request is answered as without the watch)."""

    VIOLATION = "violation"
    ERROR = "error"


WATCH_CHECKS: tuple[WatchCheck, ...] = tuple(WatchCheck)


class CacheKind(StrEnum):
    """A cache an engine serves a request from instead of computing: what a cache read names (engine/cache_reads.py).
    Members in pipeline order (a cache verdict's stage is the first that served another's content)."""

    PROCESSOR = "processor_cache"  # a media item's processed inputs (pixel values, features), front end, by media hash
    ENCODER = "encoder_cache"  # a media item's encoder rows, by the item's identifier (its hash or the client's uuid)
    PREFIX = "prefix_cache"  # KV blocks of prompt positions, by a chain of block hashes (tokens, media identifiers, salt)
    CONNECTOR = "kv_connector"  # KV of prompt positions loaded from outside the engine (LMCache, a P/D transfer)


class CacheReuse(StrEnum):
    """What a cache read served, judged from qdebug's own content fingerprints (never the engine's keys)."""

    SAME = "same_content"  # what was served was computed from the same content at the same positions: legitimate
    OTHER = "other_content"  # computed from other content: another request's media (or tokens) served to this one
    UNVERIFIED = "unverified"  # no record of who computed it, or no fingerprint of one side: cannot be judged


CACHE_KINDS: tuple[CacheKind, ...] = tuple(CacheKind)  # in pipeline order: what a request meets first comes first
