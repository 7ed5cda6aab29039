"""Untrusted text is data: request ids, answers, observed texts, evidence, donors, log messages and a trace's text,
fed with Rich markup (`[/x]`, `[link=...]`), control characters (ESC, NUL), bidi overrides (U+202E) and very long
strings through every report and TUI screen that shows them: nothing raises, what is shown is the text as typed
(hidden characters escaped), and no raw control character reaches the terminal.

The reports: a capture replay's (requests, matrix, timeline, findings), an endpoint replay's, a log's sparse
contamination, a runtime log's summary, a findings log (`qdebug replay findings.log`), `qdebug watch DIR --once`,
`qdebug attn`'s report of a trace (an engine's, say) and `qdebug diff` of two traces. The screens: the batch screen,
the request screen and the watch screen, driven with Pilot.
"""

from __future__ import annotations

import asyncio
import io
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from qdebug.shown import HIDDEN, shown

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "red_circle.qdt"

HOSTILE = ("[/x]", "[/INST]", "x[/bad]", "[link=http://evil.example]click[/link]", "[bold]", "[heads, tokens, dim]", ":thumbs_up:",
           "\x1b[31m", "\x1b]8;;http://evil.example\x1b\\", "\x00", "\u202e", "\u2028", "\r", "\x07", "\x9b", "\t")
PIECE = st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(codec="utf-8"), max_size=6))
hostile = st.lists(PIECE, min_size=1, max_size=6).map("".join)
# what a log line or a file name can carry: no whitespace, no "/" (ids are read up to a space; a path has no NUL)
hostile_id = st.lists(st.sampled_from([h for h in HOSTILE if not any(c.isspace() or c in "/\x00" for c in h)] + ["r", "q-1", "ü"]),
                      min_size=1, max_size=4).map("".join)
# the bracketed evidence the issue saw vanish from a table ("head-first ( read as )")
EVIDENCE = "head-first ([heads, tokens, dim] read as [tokens, heads, dim])"


def hidden_characters(out: str) -> set[str]:
    """The characters of `out` a terminal would act on or hide (newlines aside)."""
    return {ch for ch in out if ch != "\n" and unicodedata.category(ch) in HIDDEN}


def assert_shown_as_data(out: str, *texts: str) -> None:
    """No raw control character in `out`, and each of `texts` shown as typed (hidden characters escaped)."""
    assert not hidden_characters(out), sorted(hidden_characters(out))
    for text in texts:
        assert shown(text) in out, (shown(text), out[:2000])


def render(renderables, markup: bool = False, width: int = 400) -> str:
    """Renderables printed by a colourless console: markup=False as the CLI's consoles, True as Textual's console."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, markup=markup, emoji=markup, highlight=False)
    for r in renderables:
        console.print(r)
    return console.file.getvalue()


def hostile_report(rid: str, donor: str, answer: str, observed: str, evidence: str, message: str, *, endpoint: bool = False,
                   sparse: bool = False):
    """A replay report whose every external string is `rid`, `donor`, `answer`, ...: two requests, the first contaminated."""
    from qdebug.findings import Finding
    from qdebug.replay.batch import Event
    from qdebug.replay.report import ReplayReport, RequestOutcome
    from qdebug.vocab import EventKind, FindingKind, Severity, Verdict

    victim = RequestOutcome(id=rid, image=f"{rid}.png", reference=answer, replayed=answer, observed=observed, verdict=Verdict.CONTAMINATED,
                            donor=donor, text_offset=3, visual_offset=3, error=message, injected=[message], observed_verdict=Verdict.CONTAMINATED,
                            observed_donor=donor, stage=message if endpoint else None,
                            images=[{"index": 0, "text_offset": 3, "visual_offset": 3, "rows": 4, "donor": donor}])
    other = RequestOutcome(id=donor, image="b.png", reference=observed, replayed=observed, observed=answer, text_offset=7, visual_offset=7,
                           images=[{"index": 0, "text_offset": 7, "visual_offset": 7, "rows": 4, "donor": None}])
    events = [Event(EventKind.BUFFER_WRITE, rid, t=0.1, seq=1, offset=3, message=message),
              Event(EventKind.BUFFER_OVERWRITE, rid, t=0.2, seq=2, offset=3, donor=donor, message=evidence),
              Event(EventKind.SYNC, rid, t=0.3, seq=3, offset=3, message=message),
              Event(EventKind.SYNC, donor, t=0.4, seq=4, offset=7)]
    findings = [Finding(FindingKind.CONTAMINATION, Severity.ERROR, f"{rid} received {donor}'s rows: {evidence}", request_id=rid, donor=donor),
                Finding(FindingKind.LAYOUT, Severity.WARNING, message)]
    report = ReplayReport(source=f"{rid}.jsonl", kind="capture", mode="threads", inject=message, seed=0, requests=[victim, other],
                          contamination_ids=[rid, donor], contamination=[[0.1, 1.0], [0.0, 1.0]], events=events, findings=findings)
    if sparse:
        report.contamination, report.cells = None, [{"request_id": rid, "donor": donor, "score": 1.0, "evidence": evidence}]
    if endpoint:
        victim.burst_donors = [[donor], []]
        report.endpoint, report.repeats = f"http://127.0.0.1:9/{rid}", 2
        report.extra = {"engine_traces": {"said": f"traces: {message}"}, "engine_caches_said": message}
    return report


def replay_text(report, markup: bool) -> str:
    from qdebug.render.replay_report import replay_renderables

    return render(replay_renderables(report), markup=markup)


# --- the reports ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("markup", [False, True], ids=["cli-console", "textual-console"])
@pytest.mark.parametrize("shape", ["capture", "endpoint", "sparse"])
def test_a_replay_report_shows_every_field_as_typed(shape: str, markup: bool):
    """The crashes of the issue: an answer of `[/INST]`, an observed or id of `[/x]`; and the evidence that vanished."""
    report = hostile_report("x[/bad]", "d\x1b[31m", "[/INST] ok", "[/x] seen", EVIDENCE, "[link=http://evil.example]m[/link]\u202e",
                            endpoint=shape == "endpoint", sparse=shape == "sparse")
    out = replay_text(report, markup)
    assert_shown_as_data(out, "x[/bad]", "d\x1b[31m", EVIDENCE if shape == "sparse" else "[heads, tokens, dim]")
    assert "[/INST] ok" in out and "[/x] seen" in out if shape != "sparse" else True
    assert "[link=http://evil.example]m[/link]\\u202e" in out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rid=hostile, donor=hostile, answer=hostile, observed=hostile, evidence=hostile, message=hostile, shape=st.sampled_from(["capture", "endpoint", "sparse"]),
       markup=st.booleans())
def test_any_text_in_a_replay_report_is_data(rid, donor, answer, observed, evidence, message, shape, markup):
    if rid == donor:
        donor += "-2"
    out = replay_text(hostile_report(rid, donor, answer, observed, evidence, message, endpoint=shape == "endpoint", sparse=shape == "sparse"), markup)
    assert not hidden_characters(out)


def test_a_very_long_id_is_cut_and_still_data():
    long = "[/x]\x1b" * 20_000
    out = replay_text(hostile_report(long, "d", "a", "o", long, long), markup=True)
    assert not hidden_characters(out)
    assert "more characters)" in out  # cut, saying how much was left out
    assert len(out) < 2_000_000


def _log(path: Path, victim: str, donor: str) -> Path:
    """A runtime log in the incident's format whose request ids are `victim` and `donor`."""
    lines = [f"DEBUG VisualEncoder::encode_image: request_id={victim} start",
             f"DEBUG VisualEncoder::write_buffer: request_id={victim} wrote 256 tokens at offset 0",
             f"DEBUG VisualEncoder::encode_image: request_id={donor} start",
             f"DEBUG VisualEncoder::write_buffer: request_id={donor} overwrote buffer at offset 0 with 256 tokens (previously {victim})",
             f"DEBUG TokenSynchronizer::stitch: request_id={victim} consumed 256 tokens at offset 0"]
    path.write_text("".join(f"2024-05-01 10:00:0{k},000 {line}\n" for k, line in enumerate(lines)), encoding="utf-8")
    return path


def _cli(*args: str):
    from qdebug.cli import app

    return CliRunner().invoke(app, list(args))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(victim=hostile_id, donor=hostile_id)
def test_a_runtime_log_summary_shows_its_ids_as_data(tmp_path_factory, victim, donor):
    if victim == donor:
        donor += "-2"
    log = _log(tmp_path_factory.mktemp("log") / "rt.log", victim, donor)
    result = _cli("replay", str(log), "--exit-zero")
    assert result.exit_code == 0, result.output
    assert_shown_as_data(result.output, victim, donor)


def _findings_log(folder: Path, rid: str, evidence: str) -> Path:
    from qdebug.engine.watch_log import LOG_NAME, WatchFinding, format_line

    line = format_line(WatchFinding(check="placement", outcome="violation", stage="sync", request_id=rid, evidence=evidence,
                                    client_id=rid, donors=[rid, "b"], cobatched=["c"], host="h", time="2026-01-02T03:04:05.000000Z"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOG_NAME).write_text(line + "\n", encoding="utf-8")
    return folder / LOG_NAME


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rid=hostile, evidence=hostile)
def test_a_findings_log_and_watch_once_show_a_clients_ids_as_data(tmp_path_factory, rid, evidence):
    """`qdebug replay findings.log` (the `x[/bad]` crash) and `qdebug watch DIR --once` on the same log."""
    folder = tmp_path_factory.mktemp("watch")
    log = _findings_log(folder, rid, evidence)
    result = _cli("replay", str(log))
    assert result.exit_code == 1, result.output  # a violation, shown
    assert not hidden_characters(result.output)
    watched = _cli("watch", str(folder), "--once")
    assert watched.exit_code in (0, 1), watched.output
    assert not hidden_characters(watched.output)


def test_a_findings_log_keeps_the_bracketed_request_id():
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="qdebug-findings-"))
    result = _cli("replay", str(_findings_log(folder, "x[/bad]", EVIDENCE)))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "x[/bad]" in result.output and "[heads, tokens, dim]" in result.output


def _hostile_trace(text: str, rid: str):
    """The saved red-circle trace with its generated text, request id, a check's detail and a finding set to data."""
    from qdebug.findings import Finding
    from qdebug.trace.schema import load_trace
    from qdebug.vocab import FindingKind, Severity

    trace = load_trace(TRACE)  # a fresh copy each call
    trace.generated_text = text
    trace.request.id = rid
    trace.tokens[1] = text  # the tokenizer's text, as the preprocess stage lists it
    stage = next(iter(trace.stages.values()))  # preprocess: the stage the request screen opens on
    assert stage.checks
    stage.checks[0].detail = text
    trace.findings.append(Finding(FindingKind.LAYOUT, Severity.WARNING, text, stage=stage.name))
    return trace


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile, rid=hostile)
def test_a_traces_text_in_the_attn_report_is_data(text, rid):
    """What an engine (or any model) generated, and what a trace file says, in `qdebug attn`'s report."""
    from qdebug.render.attn_report import attn_renderables

    trace = _hostile_trace(text, rid)
    result = SimpleNamespace(trace=trace, pil_images=[None] * len(trace.images), token=None, layer=None, head=None)
    for markup in (False, True):
        out = render(attn_renderables(result), markup=markup)
        assert not hidden_characters(out)


def test_the_attn_report_shows_an_answer_of_markup_as_typed():
    from qdebug.render.attn_report import attn_renderables

    trace = _hostile_trace("[/INST] a red circle\x1b[2J", "x[/bad]")
    out = render(attn_renderables(SimpleNamespace(trace=trace, pil_images=[None], token=None, layer=None, head=None)), markup=True)
    assert_shown_as_data(out, "[/INST] a red circle\x1b[2J")


def test_diff_of_two_traces_named_and_saying_markup_shows_them_as_typed(tmp_path):
    from qdebug.trace.schema import save_trace

    a, b = tmp_path / "a[/x]\x1b.qdt", tmp_path / "b\u202e.qdt"
    save_trace(_hostile_trace("[/INST] one\x1b[31m", "r1"), a)
    save_trace(_hostile_trace("[bold]two[/bold]", "r2"), b)
    result = _cli("diff", str(a), str(b))
    assert result.exit_code in (0, 1), result.output
    assert_shown_as_data(result.output, "[bold]two[/bold]")
    assert "Traceback" not in result.output and "a[/x]\\x1b.qdt" in result.output


# --- the screens ----------------------------------------------------------------------------------------------------

def screen_text(app) -> str:
    """What the terminal shows of the current screen: the text of Textual's screenshot (its SVG), line by line."""
    import html
    import re

    rows: dict[str, list[str]] = {}
    for y, text in re.findall(r'<text[^>]*? y="([0-9.]+)"[^>]*>(.*?)</text>', app.export_screenshot(), re.S):
        rows.setdefault(y, []).append(text)
    return "\n".join(html.unescape("".join(parts)).replace("\xa0", " ") for parts in rows.values())


async def _batch_screen(report) -> str:
    from qdebug.tui.app import build_app
    from qdebug.tui.screens.batch import BatchScreen

    app = build_app(report=report)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, BatchScreen)
        await pilot.press("down")
        await pilot.pause()
        return screen_text(app)


async def _request_screen(trace) -> str:
    from qdebug.tui.app import build_app
    from qdebug.tui.screens.request import RequestScreen

    app = build_app(trace=trace, source=str(TRACE))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, RequestScreen)
        return screen_text(app)  # on preprocess: its tokens, checks and findings, and the info line


async def _watch_screen(folder: Path) -> str:
    from qdebug.commands.watch import WatchArgs
    from qdebug.tui.watch_app import build_watch_app
    from qdebug.tui.widgets.watch_views import finding_row  # noqa: F401  (the rows the screen draws)

    app = build_watch_app(WatchArgs(source=str(folder)), interval=30.0)
    async with app.run_test(size=(160, 40)) as pilot:
        for _ in range(200):  # the first reading arrives from a worker
            await pilot.pause(0.02)
            if app.screen.query("#watch-findings") and app.screen.query_one("#watch-findings").row_count:
                break
        assert app.screen.query_one("#watch-findings").row_count == 1
        return screen_text(app)


def test_the_batch_screen_shows_a_hostile_burst_as_typed():
    report = hostile_report("x[/bad]", "d\x1b[31m", "[/INST] ok", "[/x] seen", EVIDENCE, "[link=http://evil.example]m[/link]\u202e")
    out = asyncio.run(_batch_screen(report))
    assert_shown_as_data(out, "x[/bad]", "[heads, tokens, dim]")
    assert "d\\x1b[31m" in out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rid=hostile, donor=hostile, answer=hostile, evidence=hostile, sparse=st.booleans())
def test_the_batch_screen_never_reads_data_as_markup(rid, donor, answer, evidence, sparse):
    if rid == donor:
        donor += "-2"
    out = asyncio.run(_batch_screen(hostile_report(rid, donor, answer, answer, evidence, evidence, sparse=sparse)))
    assert not hidden_characters(out)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile, rid=hostile)
def test_the_request_screen_shows_a_traces_text_as_data(text, rid):
    out = asyncio.run(_request_screen(_hostile_trace(text, rid)))
    assert not hidden_characters(out)


def test_the_request_screen_shows_generated_markup_as_typed():
    """The generated text (quoted), a token, a check's detail and a finding of the stage on screen, as typed."""
    out = asyncio.run(_request_screen(_hostile_trace("[/INST] a red\x1b[2J circle", "x[/bad]")))
    assert not hidden_characters(out)
    assert out.count("[/INST] a red\\x1b[2J circle") >= 3, out


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rid=hostile, evidence=hostile)
def test_the_watch_screen_shows_a_clients_ids_as_data(tmp_path_factory, rid, evidence):
    """The live `qdebug watch DIR` crashed (and exited 0) on a request id of `[/x]`."""
    folder = tmp_path_factory.mktemp("watch")
    _findings_log(folder, rid, evidence)
    out = asyncio.run(_watch_screen(folder))
    assert not hidden_characters(out)


def test_the_watch_screen_keeps_a_bracketed_request_id(tmp_path):
    _findings_log(tmp_path, "x[/bad]", EVIDENCE)
    out = asyncio.run(_watch_screen(tmp_path))
    assert "x[/bad]" in out
