"""Trace: the plain-data record of one traced request, saved as one `.qdt` file (JSON + safetensors in a zip)."""

from __future__ import annotations

import copy
import json
import tempfile
import zipfile
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

from qdebug import strict_json
from qdebug.atomic import atomic_path
from qdebug.errors import TraceFormatError
from qdebug.findings import Finding
from qdebug.input_files import refuse_special
from qdebug.vocab import FindingKind, StageName, is_layer_stage

from .meta import TraceMeta, TraceRequest
from .summaries import Summary, summary_from_json
from .tensor_names import TensorKind, layers_holding, tensor_name

FORMAT = "qdebug-trace"
FORMAT_VERSION = 1
_JSON_NAME = "trace.json"
_TENSORS_NAME = "tensors.safetensors"

# Probabilities and logits are stored in the dtype the model computed them in (a bf16 model's are bf16) and read as
# float32, which softmax, top-k, KL and numpy need; every other tensor is read as stored.
_READ_AS_FLOAT32 = frozenset({TensorKind.LAYER_ATTN, TensorKind.STEP_LOGITS})


def _as_read(kind: TensorKind | str, t):
    """`t` as analysis reads it: attention weights and logits in float32, the rest unchanged."""
    import torch

    if TensorKind(kind) in _READ_AS_FLOAT32 and t.dtype in (torch.bfloat16, torch.float16):
        return t.float()
    return t


@dataclass
class Check:
    """One verdict inside a stage (row counts, offsets, fingerprints, NaN/Inf)."""

    name: str
    ok: bool
    detail: str = ""
    kind: FindingKind = FindingKind.CHECK_FAILED  # the finding kind when it fails (desync, shape_mismatch, position_ids, ...)

    def __post_init__(self) -> None:
        # a kind read back from JSON is a plain string: made the enum here, as Finding does (outside it: ValueError)
        self.kind = FindingKind(self.kind)


@dataclass
class Stage:
    """One pipeline stage: its canonical name, its typed summary (trace.summaries), and its checks."""

    name: str
    summary: Summary = field(default_factory=Summary)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c.ok for c in self.checks)


@dataclass
class TopK:
    """The k most likely next tokens with their probabilities."""

    token_ids: list[int]
    tokens: list[str]
    probs: list[float]

    def rows(self) -> list[dict]:
        """As a list of {token, token_id, prob}."""
        return [{"token": t, "token_id": i, "prob": p} for t, i, p in zip(self.tokens, self.token_ids, self.probs)]


@dataclass
class Step:
    """Generation step K: the chosen token, and the distribution generate chose it from.

    `topk`, `prob` and `entropy` describe the processed scores (after the checkpoint's logits processors,
    e.g. a repetition penalty); `raw_topk` and `raw_prob` the raw `lm_head` logits.
    """

    index: int
    token_id: int
    token: str
    prob: float
    entropy: float
    topk: TopK
    raw_topk: TopK | None = None
    raw_prob: float | None = None


@dataclass
class ImageInfo:
    """One image of the request: source, size, grid, placeholder span and merged-patch grid."""

    index: int
    path: str
    size: tuple[int, int]  # (width, height) as given
    grid_thw: tuple[int, int, int]  # vision patches (t, h, w)
    span: tuple[int, int] | None  # [start, end) of its placeholder tokens in the input ids
    rows: int  # merged-patch grid height (grid_h / merge)
    cols: int  # merged-patch grid width (grid_w / merge)

    @property
    def tokens(self) -> int:
        """Number of LLM tokens (merged patches) this image should occupy."""
        return self.grid_thw[0] * self.rows * self.cols


@dataclass
class Trace:
    """Everything captured for one request. Tensors are keyed by canonical names (`tensor_names.tensor_name`);
    read them with `tensor(kind, layer=, step=, item=)`."""

    meta: TraceMeta
    request: TraceRequest
    prompt_text: str
    input_ids: list[int]
    tokens: list[str]
    images: list[ImageInfo]
    stages: dict[str, Stage]
    steps: list[Step]
    generated_ids: list[int]
    generated_text: str
    attn_queries: list[int]  # sequence positions whose attention rows are kept in `layer.N.attn`
    findings: list[Finding] = field(default_factory=list)
    tensors: dict = field(default_factory=dict)

    @property
    def mixed_media(self) -> bool:
        """Whether the request mixed modalities, each traced at its own encoder (Qwen2.5-Omni): stages carry `media`."""
        stage = self.stages.get(StageName.PREPROCESS)
        return stage is not None and getattr(stage.summary, "media", None) is not None

    @property
    def num_layers(self) -> int:
        """How many decoder layers were captured."""
        return sum(1 for n in self.stages if is_layer_stage(n))

    @property
    def stage_names(self) -> list[str]:
        """Stage names in pipeline order (preprocess, encode, sync, layer.N…, logits, step.K…)."""
        return list(self.stages)

    def tensor(self, kind: TensorKind | str, layer: int | None = None, step: int | None = None, item: int | None = None):
        """The `kind` tensor of that layer, step or media item (KeyError naming them when the trace holds none)."""
        name = tensor_name(kind, layer=layer, step=step, item=item)
        if name not in self.tensors:
            where = ", ".join(f"{k} {v}" for k, v in (("layer", layer), ("step", step), ("item", item)) if v is not None)
            raise KeyError(f"trace holds no {TensorKind(kind).value} tensor{f' for {where}' if where else ''} ({name})")
        return _as_read(kind, self.tensors[name])

    def has_tensor(self, kind: TensorKind | str, layer: int | None = None, step: int | None = None, item: int | None = None) -> bool:
        """Whether the trace holds the `kind` tensor of that layer, step or media item."""
        return tensor_name(kind, layer=layer, step=step, item=item) in self.tensors

    def tensor_or_none(self, kind: TensorKind | str, layer: int | None = None, step: int | None = None, item: int | None = None):
        """The `kind` tensor of that layer, step or media item, or None when the trace holds none."""
        t = self.tensors.get(tensor_name(kind, layer=layer, step=step, item=item))
        return None if t is None else _as_read(kind, t)

    def tensor_layers(self, kind: TensorKind | str) -> list[int]:
        """The decoder layers holding a `kind` tensor, in order."""
        return layers_holding(kind, self.tensors)

    def image_positions(self) -> list[int]:
        """Sequence positions of all image placeholder tokens, image by image (a video's: its `<|video_pad|>` runs, which
        on Qwen3-VL have timestamp text between them)."""
        out: list[int] = []
        pre = self.stages.get(StageName.PREPROCESS)
        videos = getattr(pre.summary, "videos", None) if pre is not None else None
        if videos:
            return [p for v in videos for s, e in v.runs or [] for p in range(s, e)]
        for img in self.images:
            if img.span:
                out.extend(range(*img.span))
        return out

    def to_json(self) -> dict:
        """The JSON part of the trace (everything but tensors)."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "meta": self.meta.to_json(),
            "request": self.request.to_json(),
            "prompt_text": self.prompt_text,
            "input_ids": self.input_ids,
            "tokens": self.tokens,
            "images": [plain(i) for i in self.images],
            "stages": [
                {"name": s.name, "summary": s.summary.to_json(), "checks": [plain(c) for c in s.checks]}
                for s in self.stages.values()
            ],
            "steps": [plain(s) for s in self.steps],
            "generated_ids": self.generated_ids,
            "generated_text": self.generated_text,
            "attn_queries": self.attn_queries,
            "findings": [f.to_json() for f in self.findings],
        }

    @classmethod
    def from_json(cls, data: dict, tensors: dict) -> "Trace":
        """Rebuild a Trace from its JSON part and tensors (TraceFormatError on a bad shape)."""
        try:
            return cls(
                meta=TraceMeta.from_json(data["meta"]),
                request=TraceRequest.from_json(data["request"]),
                prompt_text=data["prompt_text"],
                input_ids=list(data["input_ids"]),
                tokens=list(data["tokens"]),
                images=[
                    ImageInfo(
                        index=i["index"],
                        path=i["path"],
                        size=tuple(i["size"]),
                        grid_thw=tuple(i["grid_thw"]),
                        span=tuple(i["span"]) if i["span"] is not None else None,
                        rows=i["rows"],
                        cols=i["cols"],
                    )
                    for i in data["images"]
                ],
                stages={
                    s["name"]: Stage(s["name"], summary_from_json(s["name"], s["summary"]), [Check(**c) for c in s["checks"]])
                    for s in data["stages"]
                },
                steps=[_step(s) for s in data["steps"]],
                generated_ids=list(data["generated_ids"]),
                generated_text=data["generated_text"],
                attn_queries=list(data["attn_queries"]),
                findings=[Finding(**f) for f in data["findings"]],
                tensors=tensors,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFormatError(f"trace JSON is malformed ({type(exc).__name__}: {exc})") from None


def _nan(value):
    """A probability as read back: null (how a NaN or infinity is written) is NaN again."""
    return float("nan") if value is None else value


def _topk(data: dict) -> TopK:
    return TopK(**{**data, "probs": [_nan(p) for p in data["probs"]]})


_ATOMS = (int, float, str, bool, type(None))
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, read once per class


def plain(value: object) -> object:
    """What `dataclasses.asdict` gives for `value` (dataclasses as dicts, containers rebuilt, other values deep-copied),
    without a deep copy of every number and string, which are immutable: a fifth of the engine's trace writer's time."""
    if isinstance(value, _ATOMS):
        return value
    names = _FIELD_NAMES.get(type(value))
    if names is None and is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: plain(getattr(value, name)) for name in names}
    if type(value) is list:
        return [v if isinstance(v, _ATOMS) else plain(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return type(value)(plain(v) for v in value)
    if type(value) is dict:
        return {plain(k): plain(v) for k, v in value.items()}
    return copy.deepcopy(value)  # anything else (a named tuple, a dict or list subclass) as asdict would copy it


def _step(data: dict) -> Step:
    """A step from its JSON object (NaN probabilities were written as null)."""
    raw = data.get("raw_topk")
    return Step(**{**data, "prob": _nan(data["prob"]), "entropy": _nan(data["entropy"]), "topk": _topk(data["topk"]),
                   "raw_topk": _topk(raw) if raw else None})


def save_trace(trace: Trace, path: str | Path, store_tensors: bool = False, compact: bool = False) -> Path:
    """Write `trace` to `path` atomically (a zip holding trace.json and tensors.safetensors). `store_tensors`: the
    tensors member is stored, not deflated (float rows shrink ~10% for ~35x the time: what a serving engine's writer,
    which shares the CPU with the engine, wants). `compact`: trace.json on one line (json's C encoder; indented JSON
    goes through its pure-Python one, a fifth of that writer's time), the same document."""
    from safetensors.torch import save

    path = Path(path)
    tensors = {k: v.detach().cpu().contiguous() for k, v in trace.tensors.items()}
    blob = save(tensors, metadata={"format": FORMAT, "version": str(FORMAT_VERSION)}) if tensors else b""
    payload = strict_json.dumps(trace.to_json(), indent=None if compact else 1).encode()  # a NaN prob is written as null
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_JSON_NAME, payload)
        zf.writestr(_TENSORS_NAME, blob, compress_type=zipfile.ZIP_STORED if store_tensors else None)
    return path


def require_saved(path: Path, what: str, expected: str) -> None:
    """TraceFormatError unless `path` is a regular file: "{what} not found: {path} (expected {expected})", or the
    device/FIFO refusal."""
    refuse_special(path, what, expected, TraceFormatError)
    if not path.is_file():
        raise TraceFormatError(f"{what} not found: {path} (expected {expected})")


def saved_json(zf, member: str, path: Path, suffix: str) -> object:
    """A saved file's JSON member, parsed (TraceFormatError "{path}: {member} is not JSON …" when it is not)."""
    try:
        return json.loads(zf.read(member))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise TraceFormatError(f"{path}: {member} is not JSON ({type(exc).__name__}); expected a {suffix} file") from None


def load_trace(path: str | Path) -> Trace:
    """Read a `.qdt` file; TraceFormatError (one line, naming the file and the first bad field) on anything
    unexpected. Members are size-checked before reading and streamed (zip bombs are refused). Never unpickles."""
    from qdebug.safezip import SafeZip

    from .trace_schema import validate_trace_json

    path = Path(path)
    require_saved(path, "trace", "a .qdt file written by `--save`")
    with SafeZip(path, "qdebug trace") as zf, tempfile.TemporaryDirectory() as work:
        data = saved_json(zf, _JSON_NAME, path, ".qdt")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TraceFormatError(f"{path}: not a qdebug trace (missing format marker)")
        if data.get("version") != FORMAT_VERSION:
            raise TraceFormatError(f"{path}: trace format version {data.get('version')}; this qdebug reads {FORMAT_VERSION}")
        validate_trace_json(data, str(path))
        blob = zf.extract(_TENSORS_NAME, Path(work) / _TENSORS_NAME)
        from safetensors.torch import load_file  # torch only once the file has passed every check

        try:
            tensors = load_file(blob) if blob.stat().st_size else {}
        except Exception as exc:  # safetensors raises its own error type for corrupt headers
            raise TraceFormatError(f"{path}: tensor section is corrupt ({' '.join(str(exc).split())[:200]})") from None
    trace = Trace.from_json(data, tensors)
    return trace


def trace_bytes(trace: Trace) -> int:
    """Size in bytes of the trace as saved."""
    with tempfile.TemporaryDirectory() as tmp:
        return save_trace(trace, Path(tmp) / "t.qdt").stat().st_size
