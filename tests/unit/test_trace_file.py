"""A trace saves to one .qdt file and loads back identically; bad files get one-line errors."""

import json
import zipfile

import pytest
import torch

from qdebug.errors import TraceFormatError
from qdebug.trace.meta import TraceMeta
from qdebug.trace.schema import Trace, load_trace, save_trace


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


def test_json_round_trips_byte_for_byte(demo_trace):
    trace, _ = demo_trace
    again = Trace.from_json(json.loads(json.dumps(trace.to_json())), trace.tensors)
    assert json.dumps(again.to_json()) == json.dumps(trace.to_json())


def test_meta_keeps_its_key_order_and_unknown_keys():
    data = {"qdebug": "0.1", "model": {"spec": "demo"}, "num_layers": 2, "num_heads": 4, "input_path": "ids", "later": {"x": 1}}
    meta = TraceMeta.from_json(data)
    assert meta.num_layers == 2 and meta.input_path == "ids" and meta.audio is None and meta.extra == {"later": {"x": 1}}
    assert json.dumps(meta.to_json()) == json.dumps(data)
    with pytest.raises(TypeError):
        TraceMeta.from_json({"model": {}, "num_layers": 2})
