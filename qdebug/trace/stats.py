"""Small tensor summaries used in stage summaries: stats, NaN/Inf counts, fingerprints, top-k."""

from __future__ import annotations

import hashlib

SAME_ROWS = 1 - 1e-4  # mean cosine at which a block of rows counts as the image's (clip's) own encoder rows


def tensor_stats(t) -> dict:
    """mean, std, max |x|, mean row norm, NaN and Inf counts of a `rows × dim` tensor."""
    import torch

    x = t.detach().float()
    nan, inf = int(torch.isnan(x).sum()), int(torch.isinf(x).sum())
    # the finite values in order: all of them (no masked copy) unless a NaN or Inf is there
    finite = x[torch.isfinite(x)] if nan or inf else x.reshape(-1)
    rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    norms = rows.norm(dim=-1) if rows.numel() else None
    return {
        "shape": list(x.shape),
        "mean": float(finite.mean()) if finite.numel() else float("nan"),
        "std": float(finite.std()) if finite.numel() > 1 else 0.0,
        "max_abs": float(finite.abs().max()) if finite.numel() else float("nan"),
        "norm_mean": float(norms.mean()) if norms is not None else 0.0,
        "norm_max": float(norms.max()) if norms is not None else 0.0,
        "nan": nan,
        "inf": inf,
    }


_STAT_KEYS = ("mean", "std", "max_abs", "norm_mean", "norm_max", "nan", "inf")


def stats_tensor(t):
    """The values of `tensor_stats` as one float32 vector on `t`'s own device (no host sync until it is read)."""
    import torch

    x = t.detach().float()
    finite = torch.isfinite(x)
    n = finite.sum()
    xf = torch.where(finite, x, torch.zeros((), device=x.device))
    mean = xf.sum() / n
    var = (torch.where(finite, x - mean, torch.zeros((), device=x.device)) ** 2).sum() / (n - 1).clamp(min=1)
    rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    norms = rows.norm(dim=-1)
    return torch.stack([mean, var.sqrt(), xf.abs().max(), norms.mean(), norms.max(),
                        torch.isnan(x).sum().float(), torch.isinf(x).sum().float()])


def stats_from(values, shape) -> dict:
    """`tensor_stats`'s dict from a `stats_tensor` vector (on any device) and the tensor's shape."""
    got = dict(zip(_STAT_KEYS, values.detach().to("cpu", copy=True).tolist()))
    got["nan"], got["inf"] = int(got["nan"]), int(got["inf"])
    return {"shape": list(shape), **got}


def fingerprint(t) -> str:
    """A short content hash of a tensor (dtype and shape included), equal iff the bytes are equal."""
    import torch

    x = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{x.dtype}{tuple(x.shape)}".encode())
    h.update(x.view(-1).view(dtype=torch.uint8).numpy().tobytes() if x.numel() else b"")
    return h.hexdigest()[:16]


def topk_of(logits, k: int):
    """(ids, probs, entropy in nats) of a 1-D logits vector, in float32."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    probs, ids = p.topk(min(k, p.shape[-1]))
    entropy = float(-(p * logp).nan_to_num().sum())
    return ids.tolist(), probs.tolist(), entropy


def cosine_rows(a, b):
    """Mean row-by-row cosine similarity of two `n × dim` blocks."""
    import torch

    return torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).mean()


def best_block_match(rows, seq):
    """Where a block of rows best lands inside a sequence of rows.

    Args: rows `n × dim`, seq `L × dim`.
    Returns: (start, mean cosine) of the window seq[start:start+n] most similar row-by-row to rows,
    or (None, 0.0) when the block is longer than the sequence.
    """
    import torch

    n, length = rows.shape[0], seq.shape[0]
    if n == 0 or n > length:
        return None, 0.0
    a = torch.nn.functional.normalize(rows.float(), dim=-1)
    b = torch.nn.functional.normalize(seq.float(), dim=-1)
    sim = a @ b.T  # n × L
    # score[s] = mean_j sim[j, s + j]: sum the diagonals with a strided view.
    padded = torch.nn.functional.pad(sim, (0, n))
    diag = padded.as_strided((n, length - n + 1), (padded.stride(0) + 1, 1))
    score = diag.mean(0)
    best = int(score.argmax())
    return best, float(score[best])
