"""`qdebug repl` shows its first frame before the heavy imports (torch, transformers), and keys typed before that
frame act, in order, once the run can take them; after quitting nothing is left for the shell."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

from .conftest import ROOT

ANSI = re.compile(rb"\x1b\[[0-9;?$]*[a-zA-Z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1bP[^\x1b]*\x1b\\")
REPL = ["repl", "--image", "sample_data/red_circle_top_left.png", "--prompt", "Describe the image.", "--max-new-tokens", "3"]

_NO_HEAVY_IMPORTS = """
import sys
from typer.testing import CliRunner
import qdebug.tui.app as tui

def run(self, *args, **kwargs):
    print("heavy:", sorted(m for m in ("torch", "transformers") if m in sys.modules))

tui.QDebugApp.run = run
from qdebug.cli import app
print(CliRunner().invoke(app, sys.argv[1:]).output)
"""


def test_nothing_heavy_is_imported_before_the_app_runs():
    out = subprocess.run([sys.executable, "-c", _NO_HEAVY_IMPORTS, *REPL], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "heavy: []" in out.stdout, out.stdout + out.stderr


def _plain(raw: bytes) -> str:
    return ANSI.sub(b"", raw).decode("utf-8", "replace")


def test_keys_typed_before_the_first_frame_act_and_nothing_is_left_after_quit():
    start = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:  # the child: qdebug in a terminal of 140 × 45
        os.chdir(ROOT)
        os.environ.update(TERM="xterm-256color", QDEBUG_PIXELS="off")
        os.execv(sys.executable, [sys.executable, "-m", "qdebug", *REPL])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 140, 0, 0))
    os.write(fd, b"nn")  # typed at once: long before any frame
    out, first_frame, quit_sent = b"", None, False
    deadline = start + 240
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                out += chunk
                if first_frame is None and b"\x1b[?1049h" in out and b"stages" in out:
                    first_frame = time.monotonic() - start
                if not quit_sent and "paused at sync" in _plain(out):
                    os.write(fd, b"q")
                    quit_sent = True
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        else:
            raise AssertionError(f"no quit in time; the screen said: {_plain(out)[-2000:]}")
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    text = _plain(out)
    assert first_frame is not None
    assert "n n: queued, acts once the model is loaded" in text  # the first frame took the keys while the model loaded
    assert "paused at sync" in text  # both n's acted: preprocess → encode → sync
    after = out.rsplit(b"\x1b[?1049l", 1)[-1]  # what the shell gets once the alternate screen is left
    assert not re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", after).strip(), after
    print(f"first frame {first_frame * 1000:.0f} ms after the process started")


async def test_a_model_too_big_for_the_device_is_refused_inline_after_the_first_frame():
    """The size check moved into the loader: its refusal is the model's error line, and no model is loaded."""
    from qdebug.errors import DeviceError
    from qdebug.model.choice import ModelChoice
    from qdebug.tui.app import build_app
    from qdebug.tui.widgets.message_line import MessageLine

    from .conftest import SIZE, wait_for

    def too_big():
        raise DeviceError("this request needs about 99.0 GiB on cpu but 1.0 GiB is free")

    app = build_app(model_spec=ModelChoice(model="demo", device="cpu"), prompt="hi", before_load=too_big)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.screen.runs.model_error is not None, what="the refusal")
        text, error = app.screen.query_one(MessageLine).message
        assert error and "needs about 99.0 GiB" in text
        assert app.loaded is None
