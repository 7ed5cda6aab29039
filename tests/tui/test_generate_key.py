"""`g` after a finished run: what it does agrees with what the help says it does."""

from __future__ import annotations

from types import SimpleNamespace

from qdebug.trace.request import Request
from qdebug.tui.controllers.run import RunController
from qdebug.tui.screens.help import KEYS
from qdebug.tui.session import PendingRequest
from qdebug.tui.state import TraceDoc


class _Host:
    """A request screen reduced to what RunController.generate touches."""

    def __init__(self, steps: int):
        self.doc = TraceDoc(SimpleNamespace(steps=[object()] * steps))
        self.said: list[str] = []

    def say(self, text: str, error: bool = False) -> None:
        self.said.append(text)


def _controller(steps: int, limit: int) -> tuple[RunController, _Host, list]:
    host = _Host(steps)
    runs = RunController(host, live=True, pending=PendingRequest([], "", limit), breakpoints=set())
    runs.request = Request([("text", "hi")], max_new_tokens=limit, audio_paths=["a.wav"])
    started: list = []
    runs.start = lambda request, breakpoints=None: started.append(request)
    return runs, host, started


def _help_for_g() -> str:
    return dict(KEYS)["g"]


def test_g_after_end_of_sequence_says_so_and_the_help_says_the_same():
    runs, host, started = _controller(steps=3, limit=8)
    runs.generate()
    assert not started
    assert "end-of-sequence" in host.said[-1] and "no next token" in host.said[-1]
    assert "end-of-sequence" in _help_for_g() and "no next token" in _help_for_g()


def test_g_at_the_token_limit_reruns_with_one_more_token_as_the_help_says():
    runs, host, started = _controller(steps=8, limit=8)
    runs.generate()
    assert [r.max_new_tokens for r in started] == [9]
    assert started[0].audio_paths == ["a.wav"]  # the rerun is the same request, one token longer
    assert "max_new_tokens + 1" in _help_for_g() and "limit" in _help_for_g()
