"""Tensor parallelism 2 (the CPU build runs it with one thread per worker): rank 0 alone writes, and its trace holds
the full hidden state, not one rank's shard; it agrees with transformers at every stage."""

from __future__ import annotations

import pytest

from qdebug.analysis.diff import diff_traces
from qdebug.trace.tensor_names import TensorKind as T

from .client import engine_trace, local_trace, request_for, send
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm


def test_tp2_rank0_writes_the_full_hidden_state(vllm_py, tmp_path):
    traces = tmp_path / "traces"
    # vLLM's CPU workers bind their threads to NUMA nodes; with one node, each TP worker is given one core by hand
    with VllmServer(vllm_py, tmp_path, trace_dir=traces, extra_args=("--tensor-parallel-size", "2"),
                    extra_env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"}) as server:
        server.traces = traces
        request = request_for("blue_square_bottom_right.png")
        send(server, request, "tp2")
        engine = engine_trace(server, "tp2")
        log = server.log_text()
    assert engine.meta.engine["tensor_parallel_size"] == 2 and engine.meta.engine["tensor_parallel_rank"] == 0
    assert log.count("qdebug: tracing tagged requests") == 1  # rank 1 installs nothing
    assert sorted(p.name for p in traces.glob("*.qdt")) == ["tp2.qdt"]
    local = local_trace(request)
    for n in range(local.num_layers):
        assert engine.tensor(T.LAYER_HIDDEN, layer=n).shape == local.tensor(T.LAYER_HIDDEN, layer=n).shape == (len(local.input_ids), 128)
    result = diff_traces(local, engine)
    assert result.first_divergence is None and engine.generated_ids == local.generated_ids
