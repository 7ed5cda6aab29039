"""The request screen's top line: which request or model, where the live run stands, what was generated."""

from __future__ import annotations

from rich.text import Text

from qdebug.render.data_text import data

from .controllers.run import RunController
from .state import TraceDoc


def info_text(doc: TraceDoc | None, paired: bool, runs: RunController, model_name: str | None) -> Text:
    """The line for `doc` (`paired`: one request's runs of a replay, t cycles them), the live runs of a screen that can run
    requests (`model_name`: the model being loaded, None on a screen without a model)."""
    text = Text()
    if paired and doc is not None and doc.others:
        text.append_text(data(f"request {doc.trace.request.id or '?'} · {doc.role} → {doc.trace.generated_text!r}", "bold magenta"))
        for other in doc.others:
            text.append_text(data(f"   (t: {other.role} → {other.trace.generated_text!r})", "dim"))
        return text
    live = model_name is not None
    if live:
        if runs.loaded is not None:
            text.append(data(f"model {runs.loaded.spec} ({runs.loaded.device}, {runs.loaded.dtype}) · ", "bold"))
        else:
            text.append(data(f"model {model_name} {'failed' if runs.model_error else 'loading…'} · ", "bold"))
        line = runs.line()
        if line:
            text.append(data(f"{line} · ", "bold black on yellow" if runs.paused else "bold yellow"))
        elif doc is None:
            ready = "runs when the model is loaded" if runs.run_when_loaded else "`run` starts it"
            text.append(data(f"no run yet · next request: {runs.pending.describe()} ({ready})", "dim"))
    if doc is not None:
        trace = doc.trace
        if doc.source and not (live and runs.session is not None):
            text.append(data(f"{doc.source} · ", "bold"))
        text.append(f"prompt {trace.request.prompt!r} · ", style="dim")
        if trace.generated_text or doc.complete:
            text.append(f"→ {trace.generated_text!r}", style="bold green")
        if not doc.complete:
            text.append(" (so far)" if trace.generated_text else "nothing generated yet", style="dim")
    return text
