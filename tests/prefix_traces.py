"""Engine traces of a request whose first prompt positions vLLM's prefix cache served, made without vLLM: qdebug's own
demo run of the request supplies the rows the engine would have computed (from the first computed position on), and
the engine's assembly (engine/engine_trace.py) turns them into the trace, as the plugin does inside vLLM."""

from __future__ import annotations

import random

from qdebug.engine.cache_reads import CacheRead, MediaPrint
from qdebug.engine.engine_trace import EngineModel, assemble_engine_trace
from qdebug.engine.requests import EngineRequest, Feature, rows_of_step
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import CacheKind, CacheReuse

PROMPT = "Describe the image."


def scene_image(seed: int, colour: str = "red"):
    """A 224×224 demo scene (64 image placeholders at prompt positions 3..66 of a 75-token prompt)."""
    from qdebug.demo.scenes import make_scene

    return make_scene(random.Random(seed), width=224, height=224, colour=colour, shape="circle", quadrant="bottom left").image


def local_run(model, image, tokens: int = 4):
    """qdebug's own trace of the request, every prompt row of every layer kept."""
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import RecordPolicy, trace_request

    return trace_request(model, build_request(PROMPT, [], images=[image], max_new_tokens=tokens), RecordPolicy(keep_hidden=True))


def engine_model(model) -> EngineModel:
    """The demo as the plugin describes a served model."""
    cfg = model.config
    text = cfg.text_config
    return EngineModel(spec="demo", path="demo", architecture="Qwen2VLForConditionalGeneration", device="cpu", dtype="float32",
                       attn_kernel="vllm:CPU_ATTN", num_layers=int(text.num_hidden_layers), num_heads=int(text.num_attention_heads),
                       num_kv_heads=int(text.num_key_value_heads), hidden_size=int(text.hidden_size), vocab_size=int(text.vocab_size),
                       image_token_id=int(cfg.image_token_id), merge_size=2, patch_size=14,
                       engine={"name": "vllm", "version": "0.32.0", "attention_backend": "CPU_ATTN", "dtype": "float32", "device": "cpu",
                               "tensor_parallel_size": 1, "tensor_parallel_rank": 0, "pipeline_parallel_size": 1})


def prefix_read(first: int, origin_name: str, reuse: CacheReuse = CacheReuse.SAME, why: str = "same token ids and media") -> CacheRead:
    """The engine core's record of a prefix-cache hit over positions [0, first), computed by request `origin_name`."""
    item = MediaPrint(0, "image", "f" * 16, 3, 64)
    return CacheRead(CacheKind.PREFIX, "engine-2", "engine-1", reuse, 0, first, origin_start=0, origin_end=first, reader_name="second",
                     origin_name=origin_name, media=[item], origin_media=[item], why=why)


def prefix_hit_trace(model, local, first: int, reads: list[CacheRead], rows_from=None, encode=None):
    """The engine trace of `local`'s request had vLLM's prefix cache served its positions 0..first-1: the rows of
    positions first.. (of `rows_from`, another local run, when given: what a run fed another's cached KV computes), its
    encoder rows (`encode`, else the run's own) unless the cache served the image whole, and the cache reads."""
    source = rows_from if rows_from is not None else local
    span = local.images[0].span
    grid = local.images[0].grid_thw
    feature = Feature("image", "a" * 64, span[0], span[1] - span[0], tuple(grid), [grid[0] * grid[1] * grid[2], 1176])
    req = EngineRequest("engine-2", "second", list(local.input_ids), [feature], len(local.generated_ids), cached_prefix=first)
    prompt = len(local.input_ids)
    # the request's one prefill step starts at `first`: rows_of_step records it from there (the tracer's own rule)
    (piece,) = rows_of_step(["engine-2"], [0, prompt - first], {"engine-2": req}, {"engine-2": first})
    assert piece.offset == first and req.computed_from == first
    req.embeds = [source.tensor(T.SYNC_EMBEDS)[first:]]
    req.positions = [source.tensor(T.SYNC_POSITION_IDS)[:, first:]]
    req.hidden = {n: [source.tensor(T.LAYER_HIDDEN, layer=n)[first:]] for n in range(source.meta.num_layers)}
    req.prompt_rows = prompt
    req.expected_positions = local.tensor(T.SYNC_EXPECTED_POSITION_IDS)
    if span[1] > first:
        req.encode = {0: encode if encode is not None else local.tensor(T.ENCODE, item=0)}
    req.rec.step_logits = [source.tensor(T.STEP_LOGITS, step=k) for k in range(len(source.steps))]
    req.finish_prefill()
    req.cache_reads = list(reads)
    return assemble_engine_trace(req, list(source.generated_ids), engine_model(model), model.processor.tokenizer)
