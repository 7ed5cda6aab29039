"""`step.K`: each generated token, the distribution it was chosen from (processed and raw), and its logits."""

from __future__ import annotations

import functools

from qdebug.vocab import step_stage

from ..schema import Stage, Step, TopK
from ..stats import topk_of
from ..summaries import StepSummary
from ..tensor_names import TensorKind as T, tensor_name
from .logits import token_text


def step_stages(rec, generated: list[int], tok, k: int, tensors: dict) -> tuple[list[Step], dict[str, Stage]]:
    """The Steps and their stages, one per generated token whose logits were recorded."""
    import torch

    steps, stages = [], {}
    processed = getattr(rec, "processed_scores", None) or []
    text = functools.cache(lambda i: token_text(tok, i))  # the same tokens come back in step after step's top-k: each decoded once
    for n, logits in enumerate(rec.step_logits[: len(generated)]):
        chosen = generated[n]
        raw_ids, raw_p, raw_entropy = topk_of(logits, k)
        raw_prob = float(torch.softmax(logits.float(), -1)[chosen])
        scores = processed[n] if n < len(processed) and processed[n].shape == logits.shape else logits
        if scores is logits:  # no logits processor ran (an engine's trace): the same distribution, not computed twice
            top_ids, top_p, entropy, p = list(raw_ids), list(raw_p), raw_entropy, raw_prob
        else:
            top_ids, top_p, entropy = topk_of(scores, k)
            p = float(torch.softmax(scores.float(), -1)[chosen])
        tensors[tensor_name(T.STEP_LOGITS, step=n)] = logits
        steps.append(Step(n, chosen, text(chosen), p, entropy, TopK(top_ids, [text(i) for i in top_ids], top_p),
                          raw_topk=TopK(raw_ids, [text(i) for i in raw_ids], raw_p), raw_prob=raw_prob))
        stages[step_stage(n)] = Stage(step_stage(n), StepSummary(token=text(chosen), token_id=chosen, prob=p, entropy=entropy,
                                                                 raw_prob=raw_prob, raw_entropy=raw_entropy))
    return steps, stages
