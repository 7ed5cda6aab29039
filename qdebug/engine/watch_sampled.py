"""The watch's sampled checks, on a share of steps (QDEBUG_VLLM_WATCH_SAMPLE), each a registered entry:

- `layout`: in each decoder layer, the value rows vLLM's attention kernel receives against the rows its q/k/v
  projection produced (engine/layouts.read_layout): anything but token-major is a violation naming the layer (seed
  001's head-first buffer). Hooks are attached for the sampled step only.
- `logits`: the rows the step samples from hold no NaN/Inf, and no request's row is an exact copy of another's whose
  prompt, images and tokens so far differ (two identical requests may share a row; two different ones never do).
- `positions`: at the merge of visual rows, the MRoPE ids the step feeds against the model's own rope index.
"""

from __future__ import annotations

from typing import Any

from qdebug.vocab import StageName, WatchCheck, layer_stage

from .layouts import TOKEN_MAJOR, read_layout
from .vllm_model import decoder_layers
from .watch_registry import Need, Point, WatchEntry, register


@register
class LayoutCheck(WatchEntry):
    """Layout hooks on the decoder layers for one sampled step."""

    check = WatchCheck.LAYOUT
    point = Point.DECODER
    sampled = True
    needs = frozenset({Need.LAYERS})
    stage = ""  # each finding names its layer's stage

    def __init__(self, watcher) -> None:
        super().__init__(watcher)
        self.layers = decoder_layers(watcher.runner.model)
        self.handles: list = []
        self.projected: dict[int, Any] = {}
        self.found: dict[int, str] = {}  # layer → the layout its kernel received, this step

    def begin(self) -> None:
        """Attach the layout hooks for this step."""
        for i, layer in enumerate(self.layers):
            attn = getattr(layer, "self_attn", None)
            if attn is None or getattr(attn, "attn", None) is None or getattr(attn, "qkv_proj", None) is None:
                continue
            self.handles.append(attn.qkv_proj.register_forward_hook(self._projected(i)))
            self.handles.append(attn.attn.register_forward_pre_hook(self._kernel(i, int(attn.attn.num_kv_heads)), with_kwargs=True))

    def end(self) -> None:
        """Remove the hooks; forget the step's tensors."""
        for handle in self.handles:
            handle.remove()
        self.handles, self.projected, self.found = [], {}, {}

    def _projected(self, layer: int):
        def hook(module, args, output):
            self.projected[layer] = output[0] if isinstance(output, tuple) else output

        return hook

    def _kernel(self, layer: int, kv_heads: int):
        def hook(module, args, kwargs):
            projected = self.projected.pop(layer, None)
            value = kwargs.get("value", args[2] if len(args) > 2 else None)
            if projected is not None and value is not None and value.shape[0] > 1:
                self.watcher.run(WatchCheck.LAYOUT, "", self._layout, layer, value, projected[:, -value.shape[-1]:], kv_heads)
            return None

        return hook

    def _layout(self, layer: int, given, reference, heads: int) -> list:
        layout = read_layout(given.detach(), reference.detach(), heads)
        if layout == TOKEN_MAJOR:
            return []
        recorded = self.watcher.flight.chosen  # a step's violation names a request the flight recorder traces, when it has one
        req_ids = sorted(self.watcher.runner.input_batch.req_ids, key=lambda r: r not in recorded)
        how = "head-first ([heads, tokens, dim] read as [tokens, heads, dim])" if layout != "unknown" else "neither token-major nor head-first"
        evidence = (f"layer {layer}'s attention kernel received its value rows {how}: {int(given.shape[0])} rows of a step of "
                    f"{len(req_ids)} request(s)")
        return [self.watcher.step_finding(WatchCheck.LAYOUT, layer_stage(layer), req_ids, evidence)]


@register
class LogitsCheck(WatchEntry):
    """The rows a sampled step samples from: no NaN/Inf, no copy of another request's row."""

    check = WatchCheck.LOGITS
    point = Point.LOGITS
    sampled = True
    needs = frozenset({Need.LOGITS})
    stage = StageName.LOGITS

    def findings(self, logits) -> list:
        """NaN/Inf rows and copies between different requests, in the rows this step samples from."""
        import torch

        req_ids = list(self.watcher.runner.input_batch.req_ids)[: logits.shape[0]]
        out = []
        bad = (~torch.isfinite(logits)).any(dim=-1).nonzero().flatten().tolist()
        for i in bad[:8]:
            n = int((~torch.isfinite(logits[i])).sum())
            out.append(self.watcher.step_finding(WatchCheck.LOGITS, StageName.LOGITS, [req_ids[i], *[r for r in req_ids if r != req_ids[i]]],
                                                 f"the logits row request {req_ids[i]} samples from holds {n} NaN/Inf value(s)"))
        if len(req_ids) > 1:
            sums = logits.float().sum(dim=-1).tolist()
            seen: dict[float, int] = {}
            for i, s in enumerate(sums):
                j = seen.setdefault(s, i)
                if j != i and torch.equal(logits[i], logits[j]) and self._differ(req_ids[i], req_ids[j]):
                    out.append(self.watcher.step_finding(
                        WatchCheck.LOGITS, StageName.LOGITS, [req_ids[i], req_ids[j]],
                        f"request {req_ids[i]}'s logits row is an exact copy of request {req_ids[j]}'s, whose inputs differ", donors=[req_ids[j]]))
        return out

    def _differ(self, a: str, b: str) -> bool:
        """Whether two requests' prompts, items or tokens so far differ (then equal logits rows are a copy, not a tie)."""
        requests = self.watcher.runner.requests
        sa, sb = requests.get(a), requests.get(b)
        if sa is None or sb is None:
            return False

        def key(s):
            return (list(s.prompt_token_ids or []), [str(f.identifier) for f in s.mm_features or []], list(s.output_token_ids or []))

        return key(sa) != key(sb)


@register
class PositionsCheck(WatchEntry):
    """The MRoPE ids a sampled step feeds, against the model's own rope index (MRoPE models only)."""

    check = WatchCheck.POSITIONS
    point = Point.MERGE
    sampled = True
    needs = frozenset({Need.ITEMS, Need.MROPE})
    stage = StageName.SYNC

    def applies(self) -> bool:
        return bool(getattr(self.watcher.runner, "uses_mrope", False))

    def findings(self, out) -> list:
        """The step's requests (an error reading them is this check's), each checked by `positions_findings`."""
        runner = self.watcher.runner
        req_ids = list(runner.input_batch.req_ids)
        return positions_findings(self.watcher, runner, req_ids, runner.query_start_loc.np[: len(req_ids) + 1])


def positions_findings(watcher, runner, req_ids: list[str], qsl) -> list:
    """`positions`: per request of the step, the MRoPE (t, h, w) ids the step feeds the decoder against the model's own
    `get_mrope_input_positions` recomputed for the request (prompt rows), or its position plus the recomputed delta
    (a generated token's row)."""
    import torch

    given_all = runner.mrope_positions.gpu
    out = []
    for i, rid in enumerate(req_ids):
        state = runner.requests.get(rid)
        if state is None or state.prompt_token_ids is None:
            continue
        start, end = int(qsl[i]), int(qsl[i + 1])
        done, prompt = int(state.num_computed_tokens), len(state.prompt_token_ids)
        expected, delta = runner.model.get_mrope_input_positions(list(state.prompt_token_ids), list(state.mm_features or []))
        expected = torch.as_tensor(expected, dtype=torch.int64)
        n_prompt = max(min(end - start, prompt - done), 0)
        parts = [expected[:, done:done + n_prompt]]
        if end - start > n_prompt:  # generated tokens: text positions continue at position + delta on all three axes
            first = max(done, prompt) + int(delta)
            parts.append(torch.arange(first, first + end - start - n_prompt, dtype=torch.int64).expand(3, -1))
        want = torch.cat(parts, dim=-1)
        given = given_all[:, start:end].to("cpu", torch.int64)
        if given.shape != want.shape or not torch.equal(given, want):
            wrong = (given != want).any(dim=0).nonzero().flatten().tolist() if given.shape == want.shape else list(range(end - start))
            at = done + wrong[0] if wrong else done
            evidence = (f"{len(wrong)} of {end - start} rows fed this step carry other MRoPE ids than the model's own for this request "
                        f"(first at prompt position {at}: {given[:, wrong[0]].tolist() if wrong and given.shape == want.shape else '?'} "
                        f"where {want[:, wrong[0]].tolist() if wrong and given.shape == want.shape else '?'})")
            out.append(watcher.step_finding(WatchCheck.POSITIONS, StageName.SYNC, [rid, *[r for r in req_ids if r != rid]], evidence))
    return out
