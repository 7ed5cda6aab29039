"""`logits`: top-k and entropy at every prompt position (or at the last one only)."""

from __future__ import annotations

from qdebug.vocab import StageName

from ..hooks import not_recording, to_cpu
from ..schema import Stage
from ..stats import topk_of
from ..summaries import LogitsSummary
from ..tensor_names import TensorKind as T, tensor_name


def logits_stage(loaded, rec, num_tokens: int, tok, options, tensors: dict) -> Stage:
    """Every prompt position from the model's own lm_head, unless the options ask for the last one only."""
    if getattr(options, "prompt_logits", True) or not rec.step_logits:
        return _prompt_logits(loaded, rec, num_tokens, tok, options.topk, tensors)
    # the last prompt position's logits are step 0's: no lm_head pass over the whole prompt
    last = topk_of(rec.step_logits[0], options.topk)[0]
    return Stage(StageName.LOGITS, LogitsSummary(positions=num_tokens, k=options.topk, last_topk=[token_text(tok, i) for i in last],
                                         prompt_topk="last position only"))


def _prompt_logits(loaded, rec, num_tokens: int, tok, k: int, tensors: dict) -> Stage:
    """Top-k and entropy at every prompt position, from the model's own lm_head on the final hidden states."""
    import torch

    if rec.final_hidden is None:
        return Stage(StageName.LOGITS, LogitsSummary())
    head = loaded.adapter.lm_head(loaded.model)
    top_ids, top_p, ent = [], [], []
    device = head.weight.device
    for chunk in torch.split(rec.final_hidden, 64):  # 64 rows × vocab × float32 at a time: ~0.1 GiB at Qwen's vocab
        with not_recording():  # a paused run's recorder is still active in this thread
            logits = head(chunk.to(device))
        # On the head's device: only the top-k and the entropy cross to CPU, never rows × vocab.
        logp = torch.log_softmax(logits.float(), -1)
        p = logp.exp()
        vals, idx = p.topk(min(k, p.shape[-1]), dim=-1)
        top_ids.append(to_cpu(idx))
        top_p.append(to_cpu(vals))
        ent.append(to_cpu(-(p * logp).nan_to_num().sum(-1)))
    tensors[tensor_name(T.LOGITS_TOPK_IDS)] = torch.cat(top_ids).cpu()
    tensors[tensor_name(T.LOGITS_TOPK_PROBS)] = torch.cat(top_p).cpu()
    tensors[tensor_name(T.LOGITS_ENTROPY)] = torch.cat(ent).cpu()
    last = tensors[tensor_name(T.LOGITS_TOPK_IDS)][-1].tolist()
    return Stage(StageName.LOGITS, LogitsSummary(positions=num_tokens, k=k, last_topk=[token_text(tok, i) for i in last]))


def token_text(tok, token_id: int) -> str:
    """One token as text, special tokens included."""
    return tok.decode([token_id], skip_special_tokens=False)
