"""A trace saves to one .qdt file and loads back identically; bad files get one-line errors."""

import json
import zipfile

import pytest
import torch

from qdebug.errors import TraceFormatError
from qdebug.trace.schema import load_trace, save_trace


def test_round_trip_is_identical(demo_trace, tmp_path):
    trace, _ = demo_trace
    path = save_trace(trace, tmp_path / "t.qdt")
    back = load_trace(path)
    assert back.to_json() == trace.to_json()
    assert back.tensors.keys() == trace.tensors.keys()
    assert all(torch.equal(back.tensors[k], trace.tensors[k]) for k in trace.tensors)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["tensors.safetensors", "trace.json"]
        assert not any(n.endswith(".pkl") for n in zf.namelist())


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"not a zip", "not a qdebug trace"),
        (None, "version"),
        (b"", "not a qdebug trace"),
    ],
)
def test_bad_files_are_refused(demo_trace, tmp_path, content, expected):
    path = tmp_path / "bad.qdt"
    if content is None:
        trace, _ = demo_trace
        save_trace(trace, path)
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("trace.json"))
            blob = zf.read("tensors.safetensors")
        data["version"] = 999
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("trace.json", json.dumps(data))
            zf.writestr("tensors.safetensors", blob)
    else:
        path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=expected):
        load_trace(path)


def test_missing_file(tmp_path):
    with pytest.raises(TraceFormatError, match="not found"):
        load_trace(tmp_path / "nope.qdt")
