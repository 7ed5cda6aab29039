"""Faults of the batch-dependent class, planted inside vLLM (`QDEBUG_VLLM_INJECT`, see vllm_faults.py): a request's
output depends on what else the engine ran with it, as in "wrong results with batch size > 1" reports.

- `batch-dependent-encoder`: each item of an encoder call that carries two or more items gets, added to every one of
  its rows, the mean row of the call's other items (scaled to half its own mean row norm); an item encoded alone is
  untouched.
- `batch-dependent-decoder:L`: decoder layer L's output rows of each request of a step that runs two or more requests
  get the mean of the other requests' rows added the same way; a request alone in its step is untouched.
- `nondeterministic-encoder`: every encoder call's rows get random noise (a twentieth of their mean row norm) drawn
  from a generator seeded by (seed, call number): the same item, alone, encodes differently call after call, whatever
  shared the call (the nondeterminism class: the same batch, repeated, disagrees).

Only tensors change; nothing here says which requests were mixed (qdebug reads that from what it records).
"""

from __future__ import annotations


def mixed(rows, others):
    """`rows` ([..., hidden]) plus the mean row of `others` (a list of the same), scaled to half `rows`' mean row norm."""
    flat = rows.float().reshape(-1, rows.shape[-1])
    other = sum(o.float().reshape(-1, o.shape[-1]).mean(0) for o in others) / len(others)
    scale = 0.5 * flat.norm(dim=-1).mean() / other.norm().clamp_min(1e-12)
    return (rows.float() + scale * other).to(rows.dtype)


def mix_items(outputs):
    """An encoder call's outputs (a tensor [items, rows, hidden] or a sequence of [rows, hidden]) with each item mixed
    with the others; unchanged when the call carried one item."""
    items = list(outputs)
    if len(items) < 2:
        return outputs
    out = [mixed(t, items[:i] + items[i + 1:]) for i, t in enumerate(items)]
    if hasattr(outputs, "shape"):  # one tensor for all items (a fixed feature size)
        import torch

        return torch.stack(out)
    return type(outputs)(out) if isinstance(outputs, tuple) else out


def plant_encoder(model) -> None:
    """Make the model's encoder calls batch-dependent (`model.embed_multimodal`: one call per group of items)."""
    embed = model.embed_multimodal
    model.embed_multimodal = lambda *args, **kwargs: mix_items(embed(*args, **kwargs))


def noisy(outputs, generator):
    """An encoder call's outputs (a tensor or a sequence of [rows, hidden]) each plus noise from `generator`."""
    import torch

    def one(t):
        rows = t.float()
        scale = 0.05 * rows.reshape(-1, rows.shape[-1]).norm(dim=-1).mean() / rows.shape[-1] ** 0.5
        return (rows + scale * torch.randn(rows.shape, generator=generator)).to(t.dtype)

    if hasattr(outputs, "shape"):
        return one(outputs)
    out = [one(t) for t in outputs]
    return tuple(out) if isinstance(outputs, tuple) else out


def plant_noise(model, seed: int) -> None:
    """Make the model's encoder calls nondeterministic: call n's rows get noise seeded by (seed, n)."""
    import torch

    embed, calls = model.embed_multimodal, [0]

    def call(*args, **kwargs):
        calls[0] += 1
        return noisy(embed(*args, **kwargs), torch.Generator().manual_seed(seed * 1_000_003 + calls[0]))

    model.embed_multimodal = call


def plant_decoder(runner, layer) -> None:
    """Make decoder layer `layer`'s output rows batch-dependent: each request's rows mixed with the step's others'.

    Which rows are whose comes from the runner (`input_batch.num_reqs`, `query_start_loc`), as vLLM flattens a step.
    """

    def hook(module, args, output):
        hidden, rest = (output[0], output[1:]) if isinstance(output, tuple) else (output, ())
        count = int(runner.input_batch.num_reqs)
        if count < 2:
            return None
        bounds = [int(b) for b in runner.query_start_loc.np[: count + 1]]
        parts = [hidden[a:b] for a, b in zip(bounds, bounds[1:])]
        out = hidden.clone()
        for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
            others = [p for j, p in enumerate(parts) if j != i and p.shape[0]]
            if b > a and others:
                out[a:b] = mixed(parts[i], others)
        return (out, *rest) if isinstance(output, tuple) else out

    layer.register_forward_hook(hook)
