"""An onnxruntime run of an export as a Trace of the same request, so the diff machinery compares it stage by stage."""

from __future__ import annotations

import copy
from dataclasses import replace

from qdebug.trace.schema import Stage, Step, TopK, Trace
from qdebug.trace.stats import topk_of
from qdebug.trace.summaries import summary_type
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import StageName

from .ort_run import OnnxRun


def onnx_trace(reference: Trace, run: OnnxRun, tokenizer, source: str, topk: int = 5) -> Trace:
    """A Trace holding only what the export computed (prefill: its first token is the greedy choice of its logits)."""
    import torch

    trace = copy.copy(reference)
    trace.tensors = dict(run.tensors)
    trace.findings = []
    trace.meta = replace(reference.meta, model={**reference.meta.model, "path": source, "device": run.provider, "dtype": run.dtype,
                                                "attn_kernel": "onnxruntime"}, onnx={"exposed": run.exposed})
    trace.stages = {name: Stage(name, summary_type(name)()) for name in reference.stages if name in run.exposed or name == StageName.PREPROCESS}
    logits = trace.tensor_or_none(T.STEP_LOGITS, step=0)
    trace.steps, trace.generated_ids, trace.generated_text = [], [], ""
    if logits is not None:
        ids, probs, entropy = topk_of(logits, topk)
        chosen = int(logits.argmax())
        text = lambda i: tokenizer.decode([i], skip_special_tokens=False)
        prob = float(torch.softmax(logits.float(), -1)[chosen])
        trace.steps = [Step(0, chosen, text(chosen), prob, entropy, TopK(ids, [text(i) for i in ids], probs))]
        trace.generated_ids = [chosen]
        trace.generated_text = tokenizer.decode([chosen], skip_special_tokens=True)
    return trace
