"""`:export png` draws the step under the cursor, names it in the title, and nothing in it is cut or overlapping."""

from __future__ import annotations

from qdebug.tui.app import build_app
from qdebug.tui.widgets.command_bar import CommandBar
from qdebug.tui.widgets.message_line import MessageLine

from ..cli.png_layout import assert_readable
from .conftest import SIZE, wait_for


async def test_export_png_of_the_selected_step_fits_and_names_it(trace, tmp_path):
    png = tmp_path / "step.png"
    app = build_app(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right", "right")  # the query that chose step 2
        await pilot.press("colon")
        app.screen.query_one(CommandBar).value = f"export png {png}"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.query_one(MessageLine).message[0].startswith("wrote"), timeout=120, what="export")
    text = " ".join(" ".join(s.split()) for s, _ in assert_readable(png))
    assert f"attention of generated token 2 ({trace.steps[2].token!r})" in text and "each generated token" not in text
