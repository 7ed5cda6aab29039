"""What the request screen shows: a trace document, the user's selection, and sequence-position helpers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from qdebug.vocab import EVERY_STEP, Severity, StageName, is_layer_stage, is_step_stage, layer_stage, stage_number, step_stage

BASE_STAGES = (StageName.PREPROCESS, StageName.ENCODE, StageName.SYNC)
STAGE_PATTERN = re.compile(rf"^({'|'.join(StageName)}|layer\.\d+|step\.(\d+|\*))$")
IMAGE_COLOURS = ("#2aa1b3", "#c061cb", "#e0a030", "#5fb35f")  # image i's span, cycled
TEXT_COLOUR = "#5c6773"
GENERATED_COLOUR = "#d7d7d7"


def pipeline_stages(num_layers: int | None, steps: int = 0) -> list[str]:
    """Stage names in pipeline order for a model with `num_layers` decoder layers and `steps` generated tokens."""
    layers = [layer_stage(i) for i in range(num_layers or 0)]
    return [*BASE_STAGES, *layers, StageName.LOGITS, *(step_stage(k) for k in range(steps))]


class TraceDoc:
    """A trace on screen: complete, or a snapshot of a run in progress. Compared by identity (never by tensors)."""

    def __init__(self, trace, *, complete: bool = True, pil_images: list | None = None, source: str = "", role: str = "", tokenizer=None,
                 image_dirs: tuple = (), outcome=None):
        self.trace = trace
        # what a replay measured in this request's stream (its RequestOutcome): the offsets and donor `qdebug replay` shows
        self.outcome = outcome
        self.image_dirs = image_dirs  # folders where the trace's relative image paths may be (tui/images.py)
        self.complete = complete
        self.pil_images = pil_images  # PIL images when the request is in memory (a live run), else None
        self.source = source  # where it came from: a file path, "live run", "replayed c"…
        self.role = role  # "replayed" / "reference" inside a replay ("engine, burst 2" / "engine alone" / ... of an endpoint's), else ""
        self.tokenizer = tokenizer
        self.others: list[TraceDoc] = []  # the same request's other runs (the reference; an endpoint's three ways), `t` cycles
        self._vocab: dict[int, str] | None = None

    @property
    def counterpart(self) -> TraceDoc | None:
        """The first of the other runs (a replay's reference), None when this document stands alone."""
        return self.others[0] if self.others else None

    @property
    def prompt_len(self) -> int:
        """Number of prompt tokens (input ids)."""
        return len(self.trace.input_ids)

    @property
    def length(self) -> int:
        """Prompt tokens plus generated tokens: the positions the timeline draws."""
        return self.prompt_len + len(self.trace.steps)

    def token_at(self, pos: int) -> str:
        """The token at sequence position `pos` (prompt or generated)."""
        if pos < self.prompt_len:
            return self.trace.tokens[pos] if pos < len(self.trace.tokens) else "?"
        k = pos - self.prompt_len
        return self.trace.steps[k].token if k < len(self.trace.steps) else "?"

    def step_chosen_at(self, pos: int) -> int | None:
        """The generation step whose token was chosen from position `pos`'s output, if any."""
        k = pos - (self.prompt_len - 1)
        return k if 0 <= k < len(self.trace.steps) else None

    def image_at(self, pos: int) -> tuple[int, int] | None:
        """(image index, index inside its span) when `pos` is an image placeholder."""
        for img in self.trace.images:
            if img.span and img.span[0] <= pos < img.span[1]:
                return img.index, pos - img.span[0]
        return None

    def token_text(self, token_id: int) -> str:
        """A token id as text: the tokenizer when there is one, else what the trace itself names."""
        if self.tokenizer is not None:
            return self.tokenizer.decode([token_id], skip_special_tokens=False)
        if self._vocab is None:
            vocab = dict(zip(self.trace.input_ids, self.trace.tokens))
            for step in self.trace.steps:
                vocab.update(zip(step.topk.token_ids, step.topk.tokens))
                vocab[step.token_id] = step.token
            self._vocab = vocab
        return self._vocab.get(token_id, f"#{token_id}")


@dataclass(frozen=True)
class Selection:
    """The user's choices: stage, heatmap layer/head (None = mean), cursor position, image, top-k rows."""

    stage: str | None = None
    layer: int | None = None
    head: int | None = None
    pos: int | None = None  # sequence position under the cursor (None: the query that chose step 0)
    image: int = 0
    topk: int = 5

    def kept_for(self, doc: TraceDoc, names: list[str], num_layers: int | None) -> Selection:
        """This selection on `doc` (listing stages `names`), kept where it still makes sense."""
        stage = self.stage if self.stage in names else (names[0] if names else None)
        layer = self.layer if self.layer is None or self.layer < (num_layers or 0) else None
        pos = self.pos if self.pos is not None and self.pos < doc.length else None
        return replace(self, stage=stage, layer=layer, pos=pos, image=min(self.image, max(0, len(doc.trace.images) - 1)))


def stage_changes(stage: str, doc: TraceDoc | None) -> dict:
    """What selecting `stage` changes: layer.N picks the heatmap layer, step.K the query that chose it."""
    changes: dict = {"stage": stage}
    if is_layer_stage(stage):
        changes["layer"] = stage_number(stage)
    elif is_step_stage(stage) and doc is not None:
        changes["pos"] = doc.prompt_len - 1 + stage_number(stage)
    return changes


@dataclass(frozen=True)
class View:
    """Everything a panel needs: the document on screen and the selection."""

    doc: TraceDoc | None
    sel: Selection = field(default_factory=Selection)
    stage_status: str = "done"  # status of sel.stage in the stage list
    run_line: str = ""  # "run 1 · paused at preprocess": the live run's state, worded as in the header

    @property
    def pos(self) -> int | None:
        """The cursor position, defaulting to the query that chose step 0 (the last prompt token)."""
        return None if self.doc is None else self.pos_on(self.doc)

    def pos_on(self, doc: TraceDoc) -> int:
        """The cursor position on `doc`, this view's document: `pos` for a caller that has checked there is one."""
        if self.sel.pos is not None:
            return min(self.sel.pos, max(0, doc.length - 1))
        return max(0, doc.prompt_len - 1)


def query_move(doc: TraceDoc, pos: int, delta: int) -> int:
    """The next/previous attention query position from `pos` (queries: text prompt tokens, then decode steps)."""
    queries = list(doc.trace.attn_queries) or list(range(doc.length))
    if delta > 0:
        later = [q for q in queries if q > pos]
        return later[0] if later else queries[-1]
    earlier = [q for q in queries if q < pos]
    return earlier[-1] if earlier else queries[0]


@dataclass(frozen=True)
class StageRow:
    """One line of the stage list."""

    name: str
    status: str  # pending | running | paused | done
    failed: bool = False  # a check failed, or an error finding names this stage
    breakpoint: bool = False
    warned: bool = False  # a warning finding names this stage (and nothing failed)


@dataclass(frozen=True)
class RunState:
    """Where a live run stands: stages reached, where it waits, whether the worker is alive."""

    reached: tuple[str, ...] = ()
    paused_at: str | None = None
    running: bool = False
    finished: bool = False


def run_line(run_id: int, run: RunState, outcome: str | None = None) -> str:
    """The live run's state in one phrase, the same in the header, the stage panel and the messages."""
    if outcome is not None:  # done / error / cancelled
        return f"run {run_id} · {dict(done='finished', error='failed', cancelled='cancelled').get(outcome, outcome)}"
    if run.paused_at is not None:
        return f"run {run_id} · paused at {run.paused_at}"
    if not run.reached:
        return f"run {run_id} · starting"
    return f"run {run_id} · running after {run.reached[-1]}"


def listed_stages(trace, run: RunState | None, num_layers: int | None, max_new_tokens: int | None) -> list[str]:
    """The stages the list shows: `trace`'s own when no run is going on, else the pipeline so far (with the step
    being computed once the logits are out, up to `max_new_tokens`)."""
    if run is None and trace is not None:
        return trace.stage_names
    names = pipeline_stages(num_layers)
    steps = [s for s in (run.reached if run else ()) if is_step_stage(s)]
    names += steps
    if run is not None and run.running and StageName.LOGITS in run.reached and max_new_tokens is not None and len(steps) < max_new_tokens:
        names.append(step_stage(len(steps)))
    return names


def stage_rows(names: list[str], trace, run: RunState | None, breakpoints: set[str]) -> list[StageRow]:
    """Status of each stage: done when reached (or in a complete trace), paused where the worker waits."""
    if run is not None:
        reached = set(run.reached)
    else:  # no live run: a complete trace has reached everything, nothing on screen has reached nothing
        reached = set(names) if trace is not None else set()
    next_running = None
    if run is not None and run.running and run.paused_at is None:
        next_running = next((n for n in names if n not in reached), None)
    rows = []
    for name in names:
        stage = trace.stages.get(name) if trace is not None else None
        found = findings_at(trace, name) if trace is not None else []
        failed = (stage is not None and not stage.ok) or any(f.severity == Severity.ERROR for f in found)
        warned = not failed and any(f.severity == Severity.WARNING for f in found)
        if run is not None and name == run.paused_at:
            status = "paused"
        elif name in reached:
            status = "done"
        elif name == next_running:
            status = "running"
        else:
            status = "pending"
        bp = name in breakpoints or (is_step_stage(name) and EVERY_STEP in breakpoints)
        rows.append(StageRow(name, status, failed, bp, warned))
    return rows


def findings_at(trace, name: str) -> list:
    """The trace's findings that name stage `name`: by their stage, or by their layer for a `layer.N` stage; those
    naming no stage belong to `preprocess`, the request's first stage, so every finding is shown somewhere."""
    first = name == StageName.PREPROCESS
    out = []
    for f in getattr(trace, "findings", None) or []:
        where = f.stage or (layer_stage(f.layer) if f.layer is not None else None)
        if where == name or (where is None and first):
            out.append(f)
    return out


def valid_stage(name: str, num_layers: int | None) -> bool:
    """Whether `name` is a stage a breakpoint can be set on (layer index checked when the model is known)."""
    if not STAGE_PATTERN.match(name):
        return False
    if is_layer_stage(name) and num_layers is not None:
        return stage_number(name) < num_layers
    return True
