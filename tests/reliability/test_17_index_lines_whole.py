"""Issue 35, item 6: an engine trace folder's `index.jsonl` gets whole lines or none. A full disk in the middle of an
append (here the file-size limit, which cuts a write short exactly as a full disk does) leaves no partial line for
the next entry to be glued onto, and a reader skips a torn line (a crash) and still finds every entry after it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from qdebug.commands.engine_diff import await_trace
from qdebug.engine.trace_dir import INDEX, append_index_line, find_in_index, index_entries

FULL_DISK = textwrap.dedent("""
    import errno, json, os, resource, signal, sys
    from qdebug.engine.trace_dir import INDEX, append_index_line
    root = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a short write and EFBIG instead of the signal, as ENOSPC would be
    size = os.path.getsize(os.path.join(root, INDEX))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, hard))  # room for 40 bytes of the ~200-byte line
    try:
        append_index_line(root, {"id": "2", "qdebug_id": "second", "trace": "second.qdt", "answer": "x" * 150})
        print("written")
    except OSError as exc:
        print("refused", errno.errorcode.get(exc.errno))
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # the disk has room again
    append_index_line(root, {"id": "3", "qdebug_id": "third", "trace": "third.qdt"})
""")


def test_a_full_disk_mid_line_leaves_the_index_as_it_was_and_the_next_line_whole(tmp_path):
    append_index_line(tmp_path, {"id": "1", "qdebug_id": "first", "trace": "first.qdt"})
    before = (tmp_path / INDEX).read_bytes()
    run = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "refused", run.stdout  # the write did not fit
    after = (tmp_path / INDEX).read_bytes()
    assert after.startswith(before)  # the 40 bytes that fitted were cut back off ...
    lines = after.decode().splitlines()
    assert [json.loads(line)["qdebug_id"] for line in lines] == ["first", "third"]  # ... so the next line is whole
    assert find_in_index(tmp_path, "qdebug_id", "third")["trace"] == "third.qdt"


def test_after_a_torn_last_line_the_next_entry_starts_a_line_of_its_own(tmp_path):
    append_index_line(tmp_path, {"id": "1", "qdebug_id": "first", "trace": "first.qdt"})
    with open(tmp_path / INDEX, "ab") as f:  # a writer killed mid-line
        f.write(b'{"id": "2", "qdebug_id": "torn", "tra')
    append_index_line(tmp_path, {"id": "3", "qdebug_id": "after", "trace": "after.qdt"})
    assert find_in_index(tmp_path, "qdebug_id", "after")["trace"] == "after.qdt"
    assert find_in_index(tmp_path, "qdebug_id", "torn") is None
    assert (tmp_path / INDEX).read_text().splitlines()[-1] == json.dumps({"id": "3", "qdebug_id": "after", "trace": "after.qdt"})


def test_a_reader_finds_an_entry_glued_onto_a_torn_line(tmp_path):
    glued = json.dumps({"id": "5", "qdebug_id": "glued", "trace": "glued.qdt", "answer": "a {brace} and \"quotes\""})
    (tmp_path / INDEX).write_text('{"id": "1", "qdebug_id": "ok", "trace": "ok.qdt"}\n'
                                  '{"id": "4", "qdebug_id": "torn", "answ' + glued + "\n"
                                  "not json at all\n")
    assert [e["qdebug_id"] for e in index_entries((tmp_path / INDEX).read_text().splitlines())] == ["ok", "glued"]
    assert find_in_index(tmp_path, "qdebug_id", "glued")["trace"] == "glued.qdt"


def test_diff_engine_waits_for_no_trace_that_is_already_indexed_after_a_torn_line(tmp_path, demo_trace):
    """What the issue saw: `diff --engine` waited (and timed out) for a trace that existed, its line glued to a torn one."""
    from qdebug.trace.schema import save_trace

    save_trace(demo_trace[0], tmp_path / "mine.qdt")
    (tmp_path / INDEX).write_text('{"id": "1", "qdebug_id": "other", "tr' + json.dumps({"id": "2", "qdebug_id": "mine", "trace": "mine.qdt"}) + "\n")
    trace = await_trace(tmp_path, "mine", timeout=1.0)
    assert trace.generated_text  # the trace was read, at once
