"""What a traced run's linear-attention layers did (Qwen3.5's gated delta rule): layouts, stats, state norms.

A linear-attention layer has no attention matrix; what exists is the kernel's q/k/v (their layout and stats),
the gate g and beta, and the recurrent state, whose norm per value head is kept after every kernel call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from qdebug.model.linear_attention import install, linear_tapping
from qdebug.vocab import FindingKind, StageName, layer_stage

from .hooks import to_cpu
from .protocols import FamilySink, LinearTap
from .schema import Check
from .stats import tensor_stats
from .tensor_names import TensorKind as T, tensor_name


def _stats(t) -> dict:
    """mean/min/max/NaN/Inf of a gate (g, beta), computed on its device: five numbers cross to CPU."""
    import torch

    t = t.detach().float()
    mean, low, high, nan, inf = torch.stack([t.mean(), t.min(), t.max(), t.isnan().sum().float(), t.isinf().sum().float()]).tolist()
    return {"mean": mean, "min": low, "max": high, "nan": int(nan), "inf": int(inf)}


def _qkv_stats(t) -> dict:
    """tensor_stats' mean/std/max_abs/NaN/Inf over rows of the last axis, computed on the tensor's device (scalars cross)."""
    got = tensor_stats(t.detach().float().reshape(-1, t.shape[-1]))
    return {k: v for k, v in got.items() if k in ("mean", "std", "max_abs", "nan", "inf")}


class LinearRecorder(LinearTap, FamilySink):
    """A linear-attention tap (innermost: it sees what the kernel sees) that keeps each layer's evidence on CPU:
    statistics of q/k/v/g/beta at a layer's first call and one norm per value head of the state after each call."""

    def __init__(self):
        self.layers: dict[int, dict] = {}
        self.position_ids = None  # the raw position ids the decoder received at prefill (rows × seq)

    def __call__(self, call, proceed):
        out, state = proceed(call.query, call.key, call.value, call.g, call.beta)
        rec = self.layers.setdefault(call.layer, {"calls": 0, "state_norm": []})
        if rec["calls"] == 0:
            rec["kernel"] = call.kernel
            for name in ("query", "key", "value", "g", "beta"):
                t = getattr(call, name)
                rec[f"{name}_shape"] = list(t.shape)
                rec[name] = _stats(t) if name in ("g", "beta") else _qkv_stats(t)
        rec["calls"] += 1
        if state is not None:  # B × value heads × Dk × Dv: one norm per head
            rec["state_norm"].append(to_cpu(state[0].detach().float().flatten(1).norm(dim=-1)))
        return out, state

    def decoder_input(self, args, kwargs) -> None:
        pos = kwargs.get("position_ids")
        if self.position_ids is None and pos is not None:
            self.position_ids = to_cpu(pos[:, 0] if pos.ndim == 3 else pos)

    def attach(self, trace, loaded, prepared) -> None:
        """Add each layer's kind and linear-attention evidence to its stage; the 4-row position check to `sync`."""
        import torch

        types = loaded.adapter.layer_types(loaded.config)
        trace.meta.layer_types = types
        for layer, kind in enumerate(types):
            stage = trace.stages.get(layer_stage(layer))
            if stage is None:
                continue
            stage.summary.kind = kind
            rec = self.layers.get(layer)
            if kind != "linear_attention" or rec is None:
                continue
            heads = loaded.adapter.linear_dims(loaded.config)["value_heads"]
            # A state of another shape (a kernel handed another layout) has no per-head norm: count it instead.
            kept = [n for n in rec["state_norm"] if n.shape[0] == heads]
            norms = torch.stack(kept) if kept else None
            if norms is not None:
                trace.tensors[tensor_name(T.LAYER_STATE_NORM, layer=layer)] = norms  # kernel calls × value heads
            stage.summary.linear_attention = {
                "kernel": rec["kernel"], "calls": rec["calls"],
                **{f"{n}_shape": rec[f"{n}_shape"] for n in ("query", "key", "value", "g", "beta")},
                "q": rec["query"], "k": rec["key"], "v": rec["value"], "g": rec["g"], "beta": rec["beta"],
                "state_norm_last": [round(float(x), 6) for x in norms[-1]] if norms is not None else None,
                "states_of_another_shape": len(rec["state_norm"]) - len(kept),
            }
            bad = sum(rec[n]["nan"] + rec[n]["inf"] for n in ("query", "key", "value", "g", "beta"))
            stage.checks.append(Check("q/k/v/g/beta: no NaN/Inf", bad == 0, f"{bad} non-finite", FindingKind.NAN_INF))
        pos = self.position_ids
        sync = trace.stages.get(StageName.SYNC)
        if pos is not None and sync is not None and pos.ndim == 2 and pos.shape[0] == 4:
            text = (prepared.inputs["attention_mask"][0].long().cumsum(-1) - 1).clamp(min=0)
            same = bool(torch.equal(pos[0].long(), text))
            sync.summary.position_rows = 4
            sync.checks.append(Check("4-row position ids: text row == 1-D text positions", same,
                                     "identical" if same else f"{int((pos[0].long() != text).sum())} positions differ", FindingKind.POSITION_IDS))


@contextmanager
def linear_recording(loaded) -> Iterator[LinearRecorder | None]:
    """A linear-attention recorder of a hybrid model, tapping this thread's kernel calls for the duration (None for
    other families); its decoder input comes through the thread's Recorder (`Recorder.family`)."""
    adapter = loaded.adapter
    if adapter.layer_types(loaded.config) is None:
        yield None
        return
    install(adapter.linear_kernel_module())
    rec = LinearRecorder()
    with linear_tapping(rec):
        yield rec
