"""`replay --endpoint URL --engine-traces DIR`: a folder that does not exist yet is created (parents too); a file is refused."""

from pathlib import Path

from typer.testing import CliRunner

from qdebug.cli import app

runner = CliRunner()
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _replay(traces: Path, capture: Path) -> object:
    """The replay command against a port nobody listens on, with the given trace folder."""
    return runner.invoke(app, ["replay", str(capture), "--endpoint", "http://127.0.0.1:9", "--engine-traces", str(traces),
                               "--timeout", "2", "--retries", "0"])


def test_missing_folder_is_created_with_parents(tmp_path: Path) -> None:
    """The folder (and its parents) exists after the option was read, whatever the run did after."""
    traces = tmp_path / "a" / "b" / "traces"
    # a runtime log is not a capture: the replay stops after the option was handled, with its own one-line error
    result = _replay(traces, SAMPLE / "burst.log")
    assert traces.is_dir(), result.output
    assert "--engine-traces" not in result.output, result.output
    assert result.exit_code == 2 and "not a" in result.output and "Traceback" not in result.output, result.output


def test_existing_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """A path that is a file: one-line error naming the option, exit 2, the file untouched."""
    traces = tmp_path / "traces"
    traces.write_text("not a folder")
    result = _replay(traces, SAMPLE / "burst.log")
    assert result.exit_code == 2, result.output
    lines = [l for l in result.output.splitlines() if l.strip()]
    assert len(lines) == 1 and "--engine-traces" in lines[0] and "is a file" in lines[0], result.output
    assert traces.read_text() == "not a folder"
    assert "Traceback" not in result.output
