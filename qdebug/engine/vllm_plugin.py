"""qdebug's vLLM plugin (entry point `vllm.general_plugins: qdebug = qdebug.engine.vllm_plugin:register`).

The interface, held fixed:
- `QDEBUG_VLLM_TRACE_DIR=DIR` in the server's environment turns the plugin on (unset: `register` returns at once
  and vLLM runs exactly as without it); `QDEBUG_VLLM_TRACE=all` traces every request; `QDEBUG_VLLM_KEEP=last`
  keeps statistics over every prompt row but only the last row of each layer (default `hidden`: every row).
- A client tags a request with `vllm_xargs: {"qdebug_trace": true}` and may name it with `"qdebug_id": "..."`.
- Each traced request becomes `DIR/<qdebug_id or server request id>.qdt` (qdebug's trace format) and a line of
  `DIR/index.jsonl`; the trace's `meta.engine` says which engine, version, attention backend, dtype and ranks.
- `DIR/batches.jsonl` records, for every request (tagged or not), which requests shared each step and which
  (request, item) pairs each encoder call carried (engine/batch_record.py writes it, engine/batch_log.py reads it).
- A traced request reads the caches like any other: when the prefix cache (or a KV connector) serves its first N prompt
  positions, its trace holds the rows of positions N.. and says which positions were served, by which cache, from whom
  (`meta.engine["cached_prefix"]`, every read in `meta.engine["cache_reads"]`). A client that wants every position
  computed sends a fresh `cache_salt` (and media `uuid`s), as `qdebug diff --engine` and replay's isolated phases do.
- Cache provenance (engine/cache_reads.py): with the plugin on, the front end fingerprints what each client sent,
  the engine core records who filled each KV block and who processed each media item and judges every prefix- and
  processor-cache read, the worker every encoder-cache read.
- Tensor parallelism: every rank holds the full residual stream, full logits and the full encoder rows after
  vLLM's all-reduce/all-gather, so rank 0 alone records and writes; the other ranks install nothing.
"""

from __future__ import annotations

import atexit
import importlib.abc
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .vllm_tracer import EngineTracer, TraceWriter

ENV_DIR = "QDEBUG_VLLM_TRACE_DIR"
ENV_MODE = "QDEBUG_VLLM_TRACE"
ENV_KEEP = "QDEBUG_VLLM_KEEP"  # "hidden" (default): every prompt row of every layer; "last": statistics and the last row
TOPK = 5
_RUNNER_MODULES = {"vllm.v1.worker.gpu_model_runner": "GPUModelRunner", "vllm.v1.worker.cpu_model_runner": "CPUModelRunner"}

log = logging.getLogger("vllm.qdebug")


def register() -> None:
    """Called once in each vLLM process; with tracing on (or a fault asked for), arrange for the model runner to be
    traced (or faulted) once it has loaded its model."""
    from .step_delay import requested_gather
    from .vllm_faults import requested
    from .watch_settings import watch_on

    gather = requested_gather()
    if not os.environ.get(ENV_DIR) and not requested() and not watch_on() and not gather:
        return
    try:
        if gather:
            _gather_bursts(gather)
        if watch_on():  # QDEBUG_VLLM_WATCH=1: engine/watch_engine.py (the front end serves the workers' counters)
            from .watch_engine import prepare_process

            prepare_process()
        patches = _patches(requested())
        for name, fns in patches.items():
            if name in sys.modules:
                _patch(name, fns, sys.modules[name])
        sys.meta_path.insert(0, _PatchOnImport(patches))
    except Exception as exc:  # never stop vLLM from starting
        log.warning("qdebug: plugin not installed (%s: %s)", type(exc).__name__, exc)


def _gather_bursts(seconds: float) -> None:
    """QDEBUG_VLLM_GATHER_MS in the engine-core process (vLLM imports its module before loading plugins there)."""
    core = sys.modules.get("vllm.v1.engine.core")
    if core is not None and hasattr(core, "EngineCoreProc"):
        from .step_delay import gather_bursts

        gather_bursts(core.EngineCoreProc, seconds)


def trace_all() -> bool:
    """Whether the user asked for every request to be traced."""
    return os.environ.get(ENV_MODE, "").strip().lower() == "all"


def keep_hidden() -> bool:
    """Whether traces keep every prompt row of every layer (QDEBUG_VLLM_KEEP=hidden, the default) or only the last."""
    return os.environ.get(ENV_KEEP, "hidden").strip().lower() != "last"


def check_settings() -> None:
    """Say (once, at attach) which of the plugin's settings has a value it does not know, and what it does instead."""
    mode = os.environ.get(ENV_MODE, "").strip().lower()
    if mode not in ("", "all", "tagged"):
        log.error("qdebug: %s=%s: expected all (or unset: tagged requests only); tracing tagged requests only",
                  ENV_MODE, os.environ[ENV_MODE][:100])
    keep = os.environ.get(ENV_KEEP, "hidden").strip().lower()
    if keep not in ("hidden", "last"):
        log.error("qdebug: %s=%s: expected hidden or last; keeping every prompt row (hidden)", ENV_KEEP, os.environ[ENV_KEEP][:100])


def _patches(fault: str | None) -> dict[str, list]:
    """Module → what the plugin patches in it when vLLM imports it: the model runners (worker), where caches are
    decided (front end: the media processor and the input processor; engine core: the scheduler and KV cache), and a
    fault of the cache class where it lives (engine/cache_faults.py; planted before the recording wraps it)."""
    from .cache_core import PATCHES as ENGINE_CORE
    from .cache_faults import patches as fault_patches
    from .cache_frontend import patch_input_processor, patch_processor

    out: dict[str, list] = {name: [_patch_runner_class] for name in _RUNNER_MODULES}
    for name, fn in (*(fault_patches(fault) if fault else {}).items(), *ENGINE_CORE.items(),
                     ("vllm.multimodal.processing.processor", patch_processor), ("vllm.v1.engine.input_processor", patch_input_processor)):
        out.setdefault(name, []).append(fn)
    return out


def _patch(name: str, fns: list, module) -> None:
    """Apply a module's patches in order; one that fails is logged (vLLM starts as without it)."""
    for fn in fns:
        try:
            fn(module)
        except Exception as exc:  # never stop vLLM from starting
            log.warning("qdebug: %s not patched (%s: %s)", name, type(exc).__name__, exc)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches a vLLM class when vLLM imports its module (a process that never imports it pays nothing)."""

    def __init__(self, patches: dict) -> None:
        self.patches = patches

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.patches:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util

            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        fns = self.patches[fullname]

        def exec_and_patch(module):
            exec_module(module)
            _patch(fullname, fns, module)

        setattr(loader, "exec_module", exec_and_patch)  # the loader is vLLM's; its class is not ours to subclass
        return spec


def _patch_runner_class(module) -> None:
    """Wrap the runner class's `load_model`: once the model is loaded, attach an EngineTracer to it."""
    cls = getattr(module, _RUNNER_MODULES[module.__name__], None)
    if cls is None or getattr(cls.load_model, "_qdebug", False):
        return
    original = cls.load_model

    def load_model(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        from .vllm_faults import install, requested
        from .watch_settings import watch_on

        fault = requested()
        if fault and not getattr(self, "_qdebug_fault", None):  # planted first: the tracer's hooks then see what it did
            try:
                install(self, fault)
                self._qdebug_fault = fault
            except Exception as exc:
                log.error("qdebug: fault %s not injected (%s: %s)", fault, type(exc).__name__, exc)
        from .step_delay import requested_delay, slow_steps

        delay = requested_delay()
        if delay and not getattr(self, "_qdebug_delay", None):
            slow_steps(self, delay)
            self._qdebug_delay = delay
        if watch_on() or os.environ.get(ENV_DIR):  # the step's parts subscribe to the runner's StepHooks, in its order
            _start_clock(self)
        if watch_on():
            try:
                from .watch_engine import attach_watch

                attach_watch(self)
            except Exception as exc:
                log.error("qdebug: not watching this worker (%s: %s); /metrics serves qdebug_watch_up 0", type(exc).__name__, exc)
        if os.environ.get(ENV_DIR):
            try:
                _attach(self)
            except Exception as exc:
                log.warning("qdebug: not tracing this worker (%s: %s)", type(exc).__name__, exc)
        return result

    setattr(load_model, "_qdebug", True)  # marks the patch as ours (attached once)
    setattr(cls, "load_model", load_model)


def _start_clock(runner):
    """The worker's PluginClock, timing each step from now on (vLLM's own part and the plugin's hooks around it)."""
    from .plugin_clock import PluginClock
    from .step_hooks import hooks_of

    if getattr(runner, "_qdebug_clock", None) is None:
        runner._qdebug_clock = PluginClock()
        hooks_of(runner).use_clock(runner._qdebug_clock)
        return runner._qdebug_clock
    return None


def _attach(runner) -> None:
    """Attach a tracer to a loaded runner (rank 0 of tensor parallelism; the last pipeline stage only)."""
    if getattr(runner, "_qdebug_tracer", None) is not None:
        return
    engine = _engine_info(runner)
    if engine["tensor_parallel_rank"] != 0:
        return
    if engine["pipeline_parallel_size"] > 1:
        log.warning("qdebug: pipeline parallelism splits the layers across processes; not tracing")
        return
    from functools import partial

    from .engine_trace import assemble_engine_trace
    from .trace_dir import TraceDir
    from .vllm_tracer import EngineTracer, TraceWriter

    from qdebug.errors import OutputError

    check_settings()
    try:
        folder = TraceDir(os.environ[ENV_DIR])
        folder.check_writable(ENV_DIR)
    except (OSError, OutputError) as exc:
        log.error("qdebug: not tracing this worker: %s; every request is served as without the plugin",
                  getattr(exc, "message", None) or f"cannot make {ENV_DIR}={os.environ[ENV_DIR]} ({getattr(exc, 'strerror', None) or exc})")
        return
    clock = getattr(runner, "_qdebug_clock", None)
    if clock is not None:  # DIR/clock-<pid>.json: what the plugin costs this worker's steps (benchmarks/engine.py)
        from .plugin_clock import publish

        publish(clock, str(folder.root))
    model = _engine_model(runner, engine)
    tokenizer = _Lazy(lambda: _tokenizer(runner))
    extractor = _Lazy(lambda: _feature_extractor(runner))
    writer = TraceWriter(partial(_assemble, assemble_engine_trace, runner, model, tokenizer, extractor), folder, clock)
    from .cache_witness import CacheWitness

    witness = runner._qdebug_witness = CacheWitness()  # the watch's cache check reads it too
    tracer = EngineTracer(runner, writer, trace_all=trace_all(), keep_hidden=keep_hidden(), deepstack=bool(model.deepstack_levels),
                          batches=_batch_recorder(runner, folder.root, witness), witness=witness)
    tracer.install()
    runner._qdebug_tracer = tracer
    atexit.register(_close, tracer, writer)
    log.info("qdebug: tracing %s into %s (%s)", "every request" if trace_all() else "tagged requests", os.environ[ENV_DIR],
             ", ".join(f"{k} {v}" for k, v in engine.items()))


def _close(tracer: EngineTracer, writer: TraceWriter) -> None:
    """At the worker's exit: the requests still held are written, then everything queued."""
    tracer.close()
    writer.drain()


def _batch_recorder(runner, root, witness):
    """The batch log's recorder on this runner (every request's steps, encoder calls and cache reads), or None when it
    cannot be opened (said once; tracing goes on without it)."""
    from .batch_record import BatchLogFile, BatchRecorder

    try:
        recorder = BatchRecorder(runner, BatchLogFile(root), witness)
        recorder.install()
    except (OSError, AttributeError) as exc:
        log.error("qdebug: no batch log in %s (%s: %s)", root, type(exc).__name__, exc)
        return None
    return recorder


def _assemble(assemble, runner, model, tokenizer, extractor, req, generated):
    if model.engine["attention_backend"] == "unknown":  # vLLM picks its backends after load_model, with the KV cache
        model.engine["attention_backend"] = _attention_backend(runner)
        model.attn_kernel = f"vllm:{model.engine['attention_backend']}"
    trace = assemble(req, generated, model, tokenizer.get(), TOPK, extractor.get)
    line = {"id": req.req_id, "qdebug_id": req.name, "client_request": req.name, "answer": trace.generated_text,
            "prompt_tokens": len(req.prompt_ids), "generated_tokens": len(generated),
            "engine": f"{model.engine['name']} {model.engine['version']}"}
    return trace, line


class _Lazy:
    """A value made on first use (the tokenizer: only once a traced request finishes)."""

    def __init__(self, make) -> None:
        self.make, self.value = make, None

    def get(self):
        if self.value is None:
            self.value = self.make()
        return self.value


def _tokenizer(runner):
    from transformers import AutoTokenizer

    mc = runner.model_config
    return AutoTokenizer.from_pretrained(mc.tokenizer, revision=getattr(mc, "tokenizer_revision", None),
                                         trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))


def _feature_extractor(runner):
    """The checkpoint's audio feature extractor (its rate and hop): only an audio request asks for it."""
    from transformers import AutoFeatureExtractor

    mc = runner.model_config
    return AutoFeatureExtractor.from_pretrained(mc.model, revision=getattr(mc, "revision", None),
                                                trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))


def _engine_info(runner) -> dict:
    """Which engine: name, version, attention backend, dtype, tensor/pipeline parallel sizes and this rank."""
    import vllm

    pc = runner.vllm_config.parallel_config
    try:
        from vllm.distributed import get_tensor_model_parallel_rank

        rank = int(get_tensor_model_parallel_rank())
    except Exception:
        rank = 0
    return {"name": "vllm", "version": vllm.__version__, "attention_backend": _attention_backend(runner),
            "dtype": str(runner.model_config.dtype).removeprefix("torch."), "device": str(runner.device),
            "tensor_parallel_size": int(pc.tensor_parallel_size), "tensor_parallel_rank": rank,
            "pipeline_parallel_size": int(pc.pipeline_parallel_size)}


def _attention_backend(runner) -> str:
    """The name of the backend vLLM chose for the decoder's attention ("unknown" before the KV cache exists)."""
    try:
        return str(runner.attn_groups[0][0].backend.get_name())
    except (AttributeError, IndexError, TypeError):
        return "unknown"


def _engine_model(runner, engine: dict):
    """The served model's description from vLLM's config (the checkpoint's own config.json)."""
    from .engine_trace import EngineModel
    from .vllm_model import decoder_layers, model_configs

    mc = runner.model_config
    cfg = mc.hf_config
    configs = model_configs(cfg)  # Qwen2.5-Omni keeps them under thinker_config
    text: Any = configs.text  # a transformers PretrainedConfig of whichever family: read by attribute
    vision: Any = configs.vision
    heads = int(text.num_attention_heads)
    image_token, audio_token = configs.image_token_id, configs.audio_token_id
    return EngineModel(
        spec=str(getattr(mc, "served_model_name", None) or mc.model), path=str(mc.model),
        architecture=str(configs.architecture or type(runner.model).__name__),
        device=engine["device"].split(":")[0], dtype=engine["dtype"], attn_kernel=f"vllm:{engine['attention_backend']}",
        num_layers=len(decoder_layers(runner.model)), num_heads=heads,
        num_kv_heads=int(getattr(text, "num_key_value_heads", heads)), hidden_size=int(text.hidden_size),
        vocab_size=int(text.vocab_size), image_token_id=int(image_token) if image_token is not None else None,
        merge_size=int(getattr(vision, "spatial_merge_size", 2) or 2), patch_size=int(getattr(vision, "patch_size", 14) or 14),
        engine=engine, audio_token_id=int(audio_token) if audio_token is not None else None,
        video_token_id=configs.video_token_id,
        temporal_patch_size=int(getattr(vision, "temporal_patch_size", 2) or 2), deepstack_levels=[int(i) for i in getattr(vision, "deepstack_visual_indexes", None) or []],
    )
