"""DocController: which document the request screen shows: a trace opened with `open`, none while a new run starts,
and the runs of one request that `t` cycles (replayed, reference; an endpoint's burst, alone, local model)."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from qdebug.vocab import StageName, step_stage

from ..images import image_dirs_for
from ..state import Selection, TraceDoc, stage_changes


class DocHost(Protocol):
    """What the document controller needs from the screen it puts documents on."""

    doc: TraceDoc | None
    sel: Selection

    @property
    def num_layers(self) -> int | None:
        """Decoder layers of what is on screen."""

    def stage_names(self) -> list[str]:
        """The stages listed."""

    def refresh_view(self) -> None:
        """Push the current state down to the widgets."""

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""


class DocController:
    """Puts documents on the screen (`host.doc`) and keeps `docs`, one request's runs in the order `t` cycles them."""

    def __init__(self, host: DocHost, runs: list[TraceDoc]):
        self.host = host
        for d in runs:
            d.others = [o for o in runs if o is not d]
        self.docs: list[TraceDoc] | None = runs or None

    @property
    def paired(self) -> bool:
        """The screen shows one request's runs: `t` goes to the next."""
        return self.docs is not None

    def toggle(self) -> None:
        """Show the request's next run: replayed ↔ reference; an endpoint's engine in the burst → engine alone → local model."""
        if self.docs is None:
            self.host.say("t toggles replayed/reference on a request opened from a replay", error=True)
            return
        doc = self.docs[(self.docs.index(self.host.doc) + 1) % len(self.docs)] if self.host.doc in self.docs else self.docs[0]
        self.show(doc)
        self.host.say(f"showing the {doc.role} trace")

    def clear(self) -> None:
        """A new run starts: no document on screen, the cursor back at preprocess."""
        self.host.doc = None
        self.docs = None
        self.host.sel = replace(self.host.sel, stage=StageName.PREPROCESS, pos=None)

    def open(self, trace, source: str) -> None:
        """A trace opened with `open` (the screen has stopped its run): it replaces the run or document on screen."""
        self.docs = None
        # a new trace starts a new view at its first generated token: the old cursor may sit on an image token or
        # a layer this trace never captured; only the top-k depth is a preference that carries over
        doc = TraceDoc(trace, source=source, image_dirs=image_dirs_for(source))
        first = step_stage(0) if trace.steps else (trace.stage_names[0] if trace.stages else None)
        self.host.sel = Selection(topk=self.host.sel.topk, **(stage_changes(first, doc) if first else {}))
        self.show(doc)
        self.host.say(f"opened {source}")

    def show(self, doc: TraceDoc) -> None:
        """Put a document on screen, keeping the selection where it still makes sense."""
        self.host.doc = doc
        self.host.sel = self.host.sel.kept_for(doc, self.host.stage_names(), self.host.num_layers)
        self.host.refresh_view()
