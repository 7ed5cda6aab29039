"""Beyond the fixes: command palette, context help, `export svg`, the user's keymap, and the image in pixels
(Sixel / Kitty through textual-image) with the half-block fallback."""

from __future__ import annotations

import io

import pytest

from qdebug.analysis.attention import attention_grid, peak_of
from qdebug.render.overlay import overlay_image
from qdebug.tui.app import build_app
from qdebug.tui.screens.help import HelpScreen
from qdebug.tui.screens.request import RequestScreen
from qdebug.tui.widgets.attention_view import AttentionView
from qdebug.tui.widgets.command_bar import CommandBar
from qdebug.tui.widgets.message_line import MessageLine

from .conftest import SIZE, text_of, wait_for


def _message(app) -> tuple[str, bool]:
    return app.screen.query_one(MessageLine).message


async def _command(pilot, line: str) -> None:
    await pilot.press("colon", *line, "enter")


async def _palette_pick(pilot, app, query: str, wanted: str) -> None:
    """Open the palette, search, and choose the hit whose text starts with `wanted`."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)
    hits = app.screen.query_one(CommandList)

    def index():
        return next((i for i in range(hits.option_count) if str(hits.get_option_at_index(i).prompt).startswith(wanted)), None)

    await wait_for(pilot, lambda: index() is not None, what=f"palette hit {wanted!r}")
    for _ in range(index()):
        await pilot.press("down")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, RequestScreen))


async def test_palette_lists_verbs_and_keys_and_runs_them(trace):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await _palette_pick(pilot, app, "head", "head  · key h")  # a key: runs its action
        assert app.screen.sel.head == 0
        await _palette_pick(pilot, app, "layer", ":layer")  # a verb with an argument: the bar, filled in
        bar = app.screen.query_one(CommandBar)
        assert bar.has_focus and bar.value == "layer "
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: app.screen.sel.layer == 2, what="layer 2 from the bar")


def _help_text(screen: HelpScreen) -> str:
    from rich.console import Console

    from qdebug.tui.screens.help import help_table

    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(help_table(screen.context, screen.app.user_keymap))
    return console.file.getvalue()


@pytest.mark.parametrize("key", ["question_mark", "f1"])
async def test_help_starts_with_the_focused_panel(trace, key):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("tab")  # stages → stage detail
        assert app.screen.focused.id == "detail"
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = _help_text(app.screen)
        assert text.strip().splitlines()[1].strip().startswith("▸ stage")  # first, after the title
        assert "as pdb does" in text
        await pilot.press("escape")
        await pilot.press("tab", "tab", "tab", key)  # → top-k → offsets → attention
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert "▸ attention" in _help_text(app.screen)


async def test_export_svg_writes_the_screen(trace, tmp_path):
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down")
        await _command(pilot, f"export svg {tmp_path / 'screen.svg'}")
        assert _message(app)[0].startswith("wrote")
        svg = (tmp_path / "screen.svg").read_text()
        import html
        import re

        shown = html.unescape("".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg))).replace("\xa0", " ")
        assert svg.lstrip().startswith("<svg") and "visual_offset" in shown and "sync" in shown
        await _command(pilot, f"export svg {tmp_path / 'missing' / 'screen.svg'}")
        text, error = _message(app)
        assert error and "does not exist" in text
        assert not (tmp_path / "missing").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["screen.svg"]  # nothing half-written


def _keys(tmp_path, monkeypatch, body: str) -> None:
    (tmp_path / "qdebug").mkdir(exist_ok=True)
    (tmp_path / "qdebug" / "keys.toml").write_text(body)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("QDEBUG_KEYS", raising=False)


async def test_keymap_remaps_keys_and_the_footer_shows_them(trace, tmp_path, monkeypatch):
    from textual.widgets._footer import FooterKey

    _keys(tmp_path, monkeypatch, '[keys]\nlayer-next = "ctrl+l"\nhead = "x"\n')
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        footer: dict = {}
        for _ in range(50):  # the footer recomposes its keys after mount; under load that takes more than one pause
            await pilot.pause()
            footer = {k.description: k.key_display for k in app.screen.query(FooterKey)}
            if "layer+" in footer:
                break
        assert footer["layer+"] == "^l" and footer["head"] == "x"
        await pilot.press("right_square_bracket", "h")  # the old keys no longer act
        assert (app.screen.sel.layer, app.screen.sel.head) == (None, None)
        await pilot.press("ctrl+l", "x")
        assert (app.screen.sel.layer, app.screen.sel.head) == (0, 0)
        assert "keys from" in _message(app)[0]


@pytest.mark.parametrize("body,why", [("[keys]\nfly = \"f\"\n", "unknown action 'fly'"), ("[keys\n", "not a readable TOML"),
                                      ("[keys]\nhead = 3\n", "expected a key name"),
                                      ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
                                      ("[keys]\nnext = \"j\"\nquit = \"j\"\n", "one key for two actions (j: next and quit)"),
                                      ("[keys]\nnext = \"q\"\n", "one key for two actions (q: next and quit)"),
                                      ("[keys]\nnext = \"[\"\n", "left_square_bracket: next and layer-prev"),
                                      ("# " + "x" * 70_000 + "\n", "not a keymap")])
async def test_a_bad_keymap_is_one_line_and_the_defaults_stay(trace, tmp_path, monkeypatch, body, why):
    _keys(tmp_path, monkeypatch, body)
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text, error = _message(app)
        assert error and why in text and "keys.toml" in text
        await pilot.press("h")
        assert app.screen.sel.head == 0
        await pilot.press("q")  # quit is where it always was
        await wait_for(pilot, lambda: app.return_code is not None or not app.is_running, what="q quits")


async def test_swapping_two_keys_is_not_a_clash(trace, tmp_path, monkeypatch):
    _keys(tmp_path, monkeypatch, '[keys]\nnext = "c"\ncontinue = "n"\n')
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text, error = _message(app)
        assert not error and "next = c" in text and "continue = n" in text


def test_overlay_outlines_the_peak_over_the_image(trace):
    from qdebug.tui.images import pil_image
    from qdebug.tui.state import TraceDoc

    grid = attention_grid(trace, 0)
    peak = peak_of(grid, 0)
    pil = pil_image(TraceDoc(trace), 0)
    out = overlay_image(pil, grid, peak=(peak.row, peak.col), size=120)
    cell = 120 // max(grid.shape)
    assert out.size == (grid.shape[1] * cell, grid.shape[0] * cell)
    assert out.getpixel((peak.col * cell, peak.row * cell + cell // 2)) == (255, 255, 255)  # the outline
    low = divmod(int(grid.argmin()), grid.shape[1])
    centre = (low[1] * cell + cell // 2, low[0] * cell + cell // 2)
    assert out.getpixel(centre) != pil.convert("RGB").resize(out.size).getpixel(centre)  # blended, not the bare image


# Sixel: a DCS sequence; Kitty (TGP): the image is sent once, then placed with Unicode placeholder cells (U+10EEEE)
@pytest.mark.parametrize("protocol,marker", [("sixel", "\x1bP"), ("tgp", "\U0010eeee")])
async def test_pixels_where_the_terminal_has_them(trace, monkeypatch, protocol, marker):
    monkeypatch.setenv("QDEBUG_PIXELS", protocol)
    app = build_app(trace=trace)
    assert app.pixels == protocol
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right")  # a query token with attention captured
        await pilot.pause()
        pixels = app.screen.query_one("#pixels")
        assert pixels.display and pixels.image is not None
        view = app.screen.query_one(AttentionView)
        assert view.pixels and "▀" not in text_of(view).split("layer")[0]  # no half-block thumbnail beside the grid
        from rich.console import Console

        renderable = pixels._Renderable(pixels.image, width=20, height=8) if protocol == "tgp" else None
        if renderable is not None:
            console = Console(file=io.StringIO(), force_terminal=True, width=40)
            console.print(renderable)
            assert marker in console.file.getvalue()
        else:
            from textual_image.renderable.sixel import image_to_sixels

            assert image_to_sixels(pixels.image).startswith(marker)


async def test_half_blocks_without_pixels(trace, monkeypatch):
    monkeypatch.setenv("QDEBUG_PIXELS", "off")
    app = build_app(trace=trace)
    assert app.pixels is None
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right")
        await pilot.pause()
        assert not app.screen.query("#pixels")
        assert "▀" in text_of(app.screen.query_one(AttentionView))


async def test_a_burst_of_keys_from_a_focused_panel_goes_to_the_bar_then_the_view(trace):
    from textual import events

    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("tab")
        assert app.screen.focused.id == "detail"
        for ch in ":layer 1":
            app.post_message(events.Key({":": "colon", " ": "space"}.get(ch, ch), ch))
        app.post_message(events.Key("enter", "\r"))
        app.post_message(events.Key("h", "h"))
        await wait_for(pilot, lambda: (app.screen.sel.layer, app.screen.sel.head) == (1, 0), what="layer 1 then h")
        assert app.screen.query_one(CommandBar).value == ""
