"""Scale: a traced request vs the user's own plain SDPA `generate`, on a random-weight Qwen2-VL at 2B/7B widths.

Usage: python benchmarks/scale.py [--size 2b|7b] [--depth N] [--image-tokens 1024] [--new-tokens 16] [--device auto] [--quick]
Builds the model in memory (published widths, `--depth` decoder layers: 28 on GPU, 4 on CPU by default), one image of
`--image-tokens` visual tokens, and measures in one run, interleaved: plain `generate` with SDPA, a traced request with
the default recording policy of `qdebug attn` (`--layers all --queries gen`: every layer records the generated tokens'
attention), and, for scale, one with `--queries all --keep hidden` plus the top-k at every prompt position that
`--save`/`--tui` add (every prompt row of everything; no target). Prints time ratios,
trace bytes (total and per layer, with the 28-layer projection; off a GPU also from one traced run in bfloat16, the
published checkpoints' dtype, on which the size target is judged), peak memory (RSS on CPU,
`torch.cuda.max_memory_allocated` on GPU) and one PASS/FAIL line per target.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import threading
import time

WIDTHS = {  # the published Qwen2-VL-2B / 7B text widths; vision is 1280 wide, 16 heads in both
    "2b": dict(hidden_size=1536, intermediate_size=8960, num_attention_heads=12, num_key_value_heads=2, vocab_size=151936),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4, vocab_size=152064),
    # --quick only: the smallest model the same code builds (head dim 128 for MRoPE's sections), to check the script runs
    "tiny": dict(hidden_size=256, intermediate_size=512, num_attention_heads=2, num_key_value_heads=1, vocab_size=151936),
}
REAL_DEPTH = 28


class PeakRSS:
    """Peak resident memory of this process while the block runs (sampled every 2 ms)."""

    def __enter__(self):
        self.peak, self._stop = _rss(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def build(size: str, depth: int, vision_depth: int, dtype: str, device: str, image_tokens: int):
    """A random-weight Qwen2-VL at the published widths and its processor, as a qdebug LoadedModel."""
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    from qdebug.demo.vocab import build_tokenizer
    from qdebug.model.adapters import QWEN2_VL
    from qdebug.model.attention import register
    from qdebug.model.load import LoadedModel

    tok = build_tokenizer()
    ids = tok.convert_tokens_to_ids
    w = WIDTHS[size]
    config = Qwen2VLConfig(
        text_config=dict(**w, num_hidden_layers=depth, max_position_embeddings=32768,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
                         bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>")),
        vision_config=dict(depth=vision_depth, embed_dim=1280, num_heads=16, mlp_ratio=4, hidden_size=w["hidden_size"],
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=size in ("2b", "tiny"),
    )
    config._attn_implementation = register("sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2VLForConditionalGeneration(config).to(getattr(torch, dtype)).eval()
    model.generation_config.eos_token_id = None  # random weights: always generate the full number of tokens
    pixels = image_tokens * 28 * 28
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=pixels, max_pixels=pixels), tokenizer=tok,
                                 video_processor=Qwen2VLVideoProcessor(), chat_template=tok.chat_template)
    return LoadedModel(model, processor, QWEN2_VL, "<random>", f"random-{size}", device, dtype, "sdpa")


def image_for(tokens: int):
    """An image of exactly `tokens` merged patches (a side of sqrt(tokens) × 28 px when square)."""
    from PIL import Image

    side = int(math.isqrt(tokens))
    rows = side
    cols = tokens // rows
    return Image.new("RGB", (cols * 28, rows * 28), (90, 140, 200))


def trace_figures(trace, depth: int) -> tuple[int, float, int, float]:
    """(file bytes, tensor bytes per decoder layer, tensor bytes outside the layers, projected to REAL_DEPTH layers)."""
    from qdebug.trace.schema import trace_bytes

    per_layer = sum(v.numel() * v.element_size() for k, v in trace.tensors.items() if k.startswith("layer.")) / depth
    fixed = sum(v.numel() * v.element_size() for k, v in trace.tensors.items() if not k.startswith("layer."))
    return trace_bytes(trace), per_layer, fixed, fixed + per_layer * REAL_DEPTH


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(WIDTHS), default="2b")
    parser.add_argument("--depth", type=int, default=None, help="decoder layers (default: 28 on GPU, 4 on CPU)")
    parser.add_argument("--vision-depth", type=int, default=None, help="vision blocks (default: 32 on GPU, 2 on CPU)")
    parser.add_argument("--image-tokens", type=int, default=1024)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs of each variant (default: 3 on GPU, 1 on CPU)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, seconds: checks the benchmark still runs (figures mean little)")
    args = parser.parse_args()
    if args.quick:
        args.size, args.depth, args.vision_depth, args.image_tokens, args.new_tokens, args.repeats = "tiny", 1, 1, 16, 2, 1

    import torch

    from qdebug.commands.common import quiet_transformers
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import RecordPolicy, prepare, run_generate, trace_request
    quiet_transformers()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    gpu = device.startswith("cuda")
    depth = args.depth or (REAL_DEPTH if gpu else 4)
    vision_depth = args.vision_depth or (32 if gpu else 2)
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if gpu else "float32")
    repeats = args.repeats or (3 if gpu else 1)
    if not gpu:
        torch.set_num_threads(max(1, torch.get_num_threads()))

    loaded = build(args.size, depth, vision_depth, dtype, device, args.image_tokens)
    request = build_request("Describe the image.", [], images=[image_for(args.image_tokens)], max_new_tokens=args.new_tokens)
    prepared = prepare(loaded, request)
    visual = sum(e - s for s, e in prepared.spans)
    # "default" is what `qdebug attn IMAGE PROMPT` captures (no --save/--tui: no top-k at every prompt position).
    policies = {"default": RecordPolicy(prompt_logits=False), "all": RecordPolicy(attn_layers=None, queries="all", keep_hidden=True)}

    def plain():
        loaded.model.set_attn_implementation("sdpa")  # the user's own model: transformers' SDPA, no qdebug kernel
        try:
            return run_generate(loaded, prepared.inputs, args.new_tokens), None
        finally:
            loaded.model.set_attn_implementation(loaded.model.config._attn_implementation_qdebug)

    loaded.model.config._attn_implementation_qdebug = loaded.model.config._attn_implementation

    def traced(policy):
        return lambda: (None, trace_request(loaded, request, policies[policy], prepared=prepared))

    variants = {"plain sdpa generate": plain, "traced, default policy": traced("default"), "traced, everything": traced("all")}
    times: dict = {k: [] for k in variants}
    peaks: dict = {k: 0 for k in variants}
    traces: dict = {}
    for fn in variants.values():  # warm-up
        fn()
    for _ in range(repeats):
        for name, fn in variants.items():  # interleaved, so drift hits every variant alike
            if gpu:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            with PeakRSS() as rss:
                start = time.perf_counter()
                _, trace = fn()
                if gpu:
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - start
            times[name].append(elapsed)
            peak = torch.cuda.max_memory_allocated() if gpu else rss.peak
            peaks[name] = max(peaks[name], peak)
            if trace is not None:
                traces[name] = trace
            del trace

    base_t = statistics.median(times["plain sdpa generate"])
    base_m = peaks["plain sdpa generate"]
    print(f"random Qwen2-VL at {args.size} widths, {depth} decoder layers, {vision_depth} vision blocks, {dtype} on {device}; "
          f"{visual} visual tokens, {len(prepared.inputs['input_ids'][0])} prompt tokens, {args.new_tokens} new tokens, {repeats} timed run(s)")
    memory = "peak CUDA memory allocated" if gpu else "peak RSS"
    results = {}
    for name in variants:
        t = statistics.median(times[name])
        line = f"{name:26s} {t:8.2f} s  ×{t / base_t:.2f}   {memory} {peaks[name] / 2**30:.2f} GiB ({(peaks[name] - base_m) / base_m:+.1%})"
        if name in traces:
            size, per_layer, fixed, projected = trace_figures(traces[name], depth)
            line += (f"   trace file {size / 1e6:.1f} MB, in memory {(fixed + per_layer * depth) / 1e6:.1f} MB "
                     f"({per_layer / 1e6:.2f} MB per layer; at {REAL_DEPTH} layers {projected / 1e6:.1f} MB)")
            results[name] = (t / base_t, peaks[name] / base_m, projected, size, per_layer)
        print(line)
    ratio, mem, projected, size, _ = results["traced, default policy"]
    kept_as = dtype
    if dtype != "bfloat16":  # the published checkpoints are bf16, and a trace keeps the model's dtype: measure that too
        del loaded, prepared
        kept_as = "bfloat16, the published checkpoints' dtype"
        bf16 = trace_request(build(args.size, depth, vision_depth, "bfloat16", device, args.image_tokens), request, policies["default"])
        size16, per16, fixed16, projected = trace_figures(bf16, depth)
        print(f"{'traced, default, bfloat16':26s}   trace file {size16 / 1e6:.1f} MB, in memory {(fixed16 + per16 * depth) / 1e6:.1f} MB "
              f"({per16 / 1e6:.2f} MB per layer; at {REAL_DEPTH} layers {projected / 1e6:.1f} MB)")
    ratio_all = ratio  # the default policy already records attention in every layer (`--layers all`)
    at = "" if depth == REAL_DEPTH else f" (projected from {depth} layers)"
    checks = [
        # The targets of "One media item from intake to verdict" (a traced request costs what the user's own run does).
        (f"default policy trace ≤ 30 MB at {REAL_DEPTH} layers{at}, {kept_as}: {projected / 1e6:.1f} MB", projected <= 30e6),
        (f"default policy time ≤ 1.03× plain SDPA: ×{ratio:.2f}", ratio <= 1.03),
        (f"default policy peak memory ≤ plain + 5%: {mem - 1:+.1%}", mem <= 1.05),
        (f"--layers all time ≤ 1.5× plain SDPA (the default policy's run): ×{ratio_all:.2f}", ratio_all <= 1.5),
    ]
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'} {text}")


if __name__ == "__main__":
    main()
