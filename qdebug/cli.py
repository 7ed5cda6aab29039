"""The `qdebug` command line (Typer). Commands are thin: parse, call, render. Heavy imports stay inside."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from qdebug.errors import QDebugError

app = typer.Typer(
    name="qdebug",
    help="A debugger for Qwen multimodal inference: stages, attention, replays of concurrent bursts, diffs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
demo_app = typer.Typer(help="The built-in demo Qwen2-VL model (trained on procedural scenes).", no_args_is_help=True)
app.add_typer(demo_app, name="demo")

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="`demo`, a local HF checkpoint directory, or a hub id in the local HF cache.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto | cpu | cuda | cuda:N (auto = CUDA when present).")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="auto | float32 | bfloat16 | float16 (auto = bf16 on GPU, fp32 on CPU).")]
KernelOpt = Annotated[str, typer.Option("--attn", help="Attention kernel outside captured layers: eager | sdpa.")]


def _fail(message: str, code: int) -> None:
    typer.echo(f"qdebug: error: {message}", err=True)
    raise typer.Exit(code)


def friendly(fn):
    """Map QDebugError to a one-line error and its exit code; Ctrl-C to exit 130. Never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except QDebugError as exc:
            _fail(exc.message, exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except MemoryError:
            _fail("out of memory (try a smaller --max-new-tokens, --dtype bfloat16 or a GPU)", 6)

    return wrapper


@app.command()
@friendly
def attn(
    image: Annotated[Path, typer.Argument(help="Image file (PNG, JPEG, ...).")],
    prompt: Annotated[str, typer.Argument(help="Prompt text; put `<image>` where each image goes, or none to put images first.")],
    more_images: Annotated[Optional[list[Path]], typer.Option("--image", help="Another image for the same request (repeatable).")] = None,
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    kernel: KernelOpt = "eager",
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate (greedy).")] = 16,
    topk: Annotated[int, typer.Option("--topk", min=1, help="How many alternatives per token.")] = 5,
    layer: Annotated[Optional[int], typer.Option("--layer", help="Decoder layer for the heatmap (default: mean of layers).")] = None,
    head: Annotated[Optional[int], typer.Option("--head", help="Attention head (default: mean of heads).")] = None,
    token: Annotated[Optional[int], typer.Option("--token", help="Only this generation step's attention (default: all).")] = None,
    png: Annotated[Optional[Path], typer.Option("--png", help="Write heatmaps over the image to this PNG.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to PATH, or `-` for stdout.")] = None,
    save: Annotated[Optional[Path], typer.Option("--save", help="Save the full trace (.qdt) for `qdebug repl --trace` / `diff`.")] = None,
    tui: Annotated[bool, typer.Option("--tui", help="Open the result in the interactive debugger.")] = False,
) -> None:
    """Run one request; show generated text, stage checks, top-k per token and attention over the image."""
    from qdebug.commands.attn import AttnArgs, attn_renderables, run_attn, write_outputs
    from qdebug.commands.common import consoles, progress

    args = AttnArgs([image, *(more_images or [])], prompt, model, device, dtype, kernel, max_new_tokens, topk, layer, head, token, png, json_out, save)
    report, status = consoles(json_to_stdout=json_out == "-")
    with progress(status, f"loading {model} and tracing…"):
        trace, result, pil_images = run_attn(args)
    write_outputs(args, trace, result, pil_images)
    if tui:
        from qdebug.tui.app import build_app

        build_app(trace=trace, source=f"qdebug attn {image}").run()
        return
    if json_out != "-" or report.is_terminal:
        for renderable in attn_renderables(trace, result, pil_images, args):
            report.print(renderable)
    if png is not None:
        status.print(f"wrote {png}")
    if any(f.severity == "error" for f in trace.findings):
        raise typer.Exit(1)


@app.command()
@friendly
def replay(
    file: Annotated[Path, typer.Argument(help="A request capture (JSONL of chat-completions bodies) or a runtime log (.gz too).")],
    more_files: Annotated[Optional[list[Path]], typer.Argument(help="More runtime logs (rotated files): merged in time order.", show_default=False)] = None,
    fmt: Annotated[Optional[str], typer.Option("--format", help="capture | runtime-log (default: detected).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="threads (N threads share one model) | batched (one padded batch).")] = "threads",
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Threads running at once in threads mode.")] = 4,
    inject: Annotated[str, typer.Option("--inject", help="none | shared-visual-buffer | offset-shift:K")] = "none",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the injected interleaving (same seed, same schedule).")] = 0,
    allow_paths: Annotated[bool, typer.Option("--allow-paths", help="Let image paths point outside the capture's folder.")] = False,
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    kernel: KernelOpt = "eager",
    emit_log: Annotated[Optional[Path], typer.Option("--emit-log", help="Write the replay's events in the runtime-log format.")] = None,
    timeline_png: Annotated[Optional[Path], typer.Option("--timeline-png", help="Draw the offset timeline to this PNG.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the report as JSON to PATH, or `-` for stdout.")] = None,
    save: Annotated[Optional[Path], typer.Option("--save", help="Save the report with every trace (.qdr) for `repl`.")] = None,
    tui: Annotated[bool, typer.Option("--tui", help="Open the batch screen of the interactive debugger.")] = False,
    since: Annotated[Optional[str], typer.Option("--since", help="Logs: only events at or after this ISO time.")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Logs: only events at or before this ISO time.")] = None,
    request: Annotated[Optional[str], typer.Option("--request", help="Logs: one request's whole story (its events and those naming it as donor).")] = None,
    kind: Annotated[Optional[list[str]], typer.Option("--kind", help="Logs: only events of a kind: overwrite | desync | shape | oob (repeatable).")] = None,
    jsonl: Annotated[Optional[str], typer.Option("--jsonl", help="Write the events as JSON Lines to PATH, or `-` for stdout.")] = None,
) -> None:
    """Replay a captured burst (or read a runtime log) and show who got whose visual tokens, at which offsets, when."""
    from qdebug.commands.common import consoles
    from qdebug.commands.log_replay import make_filter
    from qdebug.commands.replay import ReplayArgs, run_replay, write_replay_outputs
    from qdebug.render.replay_json import write_events_jsonl, write_report_json

    if json_out == "-" and jsonl == "-":
        _fail("--json - and --jsonl - would both write to stdout (expected a file for one of them)", 2)
    report_console, status = consoles(json_to_stdout="-" in (json_out, jsonl))
    log_filter = make_filter(since, until, request, kind)
    report = run_replay(ReplayArgs(file, fmt, mode, concurrency, inject, seed, allow_paths, model, device, dtype, kernel,
                                   tuple(more_files or ()), log_filter), status)
    write_replay_outputs(report, emit_log, timeline_png, save)
    write_report_json(report, json_out)
    if jsonl is not None:
        write_events_jsonl(report, jsonl)
    if tui:
        from qdebug.tui.app import build_app

        build_app(report=report).run()
    elif "-" not in (json_out, jsonl) or report_console.is_terminal:
        from qdebug.render.attn_report import findings_panel
        from qdebug.render.replay_report import matrix_table, requests_table, timeline_table

        if report.kind == "runtime-log":
            from qdebug.render.log_summary import log_renderables

            renderables = log_renderables(report)
        else:
            renderables = (requests_table(report), matrix_table(report), timeline_table(report), findings_panel(report.findings))
        for renderable in renderables:
            report_console.print(renderable)
        if report.kind == "runtime-log":
            status.print(f"{report.unknown_lines} unrecognised line(s) kept and counted")
    if report.interrupted:
        meta = getattr(report.log_index, "meta", None)
        if meta:
            status.print(f"interrupted after {meta['total_lines']:,} lines ({meta['bytes_read']:,} of {meta['bytes_total']:,} bytes): "
                         "the report covers what was read")
        else:
            status.print("interrupted: the report covers the requests that finished")
        raise typer.Exit(130)
    if report.kind == "capture" and any(r.verdict == "error" for r in report.requests):
        raise typer.Exit(1)  # some captured requests could not be replayed


@app.command()
@friendly
def diff(
    first: Annotated[str, typer.Argument(help="IMAGE (then PROMPT), or a saved trace A.qdt.")],
    second: Annotated[str, typer.Argument(help="PROMPT, or a saved trace B.qdt.")],
    vary: Annotated[str, typer.Option("--vary", help="What B changes: none | paths (token ids vs inputs_embeds) | dtype | attn (eager vs sdpa) | device (cpu vs cuda).")] = "none",
    order: Annotated[str, typer.Option("--order", help="image-first | text-first | both: where the image goes in the message.")] = "image-first",
    inject: Annotated[Optional[str], typer.Option("--inject", help="Break B on purpose: mrope-text-only | head-first:LAYER.")] = None,
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    kernel: KernelOpt = "eager",
    a_dtype: Annotated[Optional[str], typer.Option("--a-dtype", help="dtype of run A (with --vary dtype: default float32).")] = None,
    b_dtype: Annotated[Optional[str], typer.Option("--b-dtype", help="dtype of run B (with --vary dtype: default bfloat16).")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate (greedy).")] = 16,
    atol: Annotated[Optional[float], typer.Option("--atol", help="Absolute tolerance (default by dtype).")] = None,
    rtol: Annotated[Optional[float], typer.Option("--rtol", help="Relative tolerance (default by dtype).")] = None,
    png: Annotated[Optional[Path], typer.Option("--png", help="Write the per-stage divergence plot to this PNG.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the comparison as JSON to PATH, or `-` for stdout.")] = None,
) -> None:
    """Find the first stage where two runs that should agree part (two input paths, dtypes, kernels, devices, or two saved traces)."""
    from qdebug.commands.common import consoles, emit_json, progress
    from qdebug.commands.diff import DiffArgs, diff_json, run_diff

    args = DiffArgs(first, second, vary, order, inject, model, device, dtype, kernel, a_dtype, b_dtype, max_new_tokens, atol, rtol)
    report, status = consoles(json_to_stdout=json_out == "-")
    with progress(status, "running both sides…"):
        results = run_diff(args)
    if png is not None:
        from qdebug.render.plots import diff_png

        diff_png(results[0][1], png)
    emit_json(diff_json(results), json_out)
    if json_out != "-" or report.is_terminal:
        from qdebug.render.diff_report import diff_renderables

        for order_label, result, _, _ in results:
            for renderable in diff_renderables(order_label, result):
                report.print(renderable)
    if any(r.first_divergence is not None or r.a_text != r.b_text for _, r, _, _ in results):
        raise typer.Exit(1)


@app.command()
@friendly
def repl(
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    kernel: KernelOpt = "eager",
    images: Annotated[Optional[list[Path]], typer.Option("--image", help="Pre-fill the request with this image (repeatable).")] = None,
    prompt: Annotated[Optional[str], typer.Option("--prompt", help="Pre-fill the request's prompt.")] = None,
    trace: Annotated[Optional[Path], typer.Option("--trace", help="Open a saved trace (.qdt) without loading any model.")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate (greedy).")] = 16,
) -> None:
    """Open the interactive debugger: step a request through its stages, see offsets, attention and top-k."""
    from qdebug.trace.request import load_image

    for path in images or []:
        load_image(path)  # fail before the UI opens
    from qdebug.tui.app import ModelSpec, build_app

    if trace is not None:
        from qdebug.trace.schema import load_trace

        tui = build_app(trace=load_trace(trace), source=str(trace))
    else:
        tui = build_app(model_spec=ModelSpec(model, device, dtype, kernel), image_paths=list(images or []), prompt=prompt, max_new_tokens=max_new_tokens)
    tui.run()


@demo_app.command("train")
@friendly
def demo_train(
    out: Annotated[Optional[Path], typer.Option("--out", help="Where to write the checkpoint (default: the packaged one).")] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Training steps.")] = 5000,
    seed: Annotated[int, typer.Option("--seed", help="Seed: same seed, same checkpoint.")] = 1234,
) -> None:
    """Regenerate the demo checkpoint from procedural scenes (deterministic; ~12 min on 2 CPU cores)."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.demo.train import CHECKPOINT_DIR, TrainSettings, train

    quiet_transformers()
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    from qdebug.commands.common import consoles

    console = consoles(json_to_stdout=False)[1]
    target = out or CHECKPOINT_DIR
    if console.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("training"), BarColumn(), TextColumn("{task.completed}/{task.total} loss {task.fields[loss]:.4f}"), TimeRemainingColumn(), console=console) as bar:
            task = bar.add_task("train", total=steps, loss=float("nan"))
            train(TrainSettings(seed=seed, steps=steps), target, on_step=lambda s, l: bar.update(task, completed=s + 1, loss=l))
    else:
        train(TrainSettings(seed=seed, steps=steps), target)
    console.print(f"wrote {target}")


@demo_app.command("eval")
@friendly
def demo_eval(
    model: ModelOpt = "demo",
    scenes: Annotated[int, typer.Option("--scenes", min=1, help="Fresh scenes to caption.")] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Scene seed (the default is never used in training).")] = 987654,
) -> None:
    """Caption fresh scenes; print exact-caption and attention-peak-in-quadrant rates."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.demo.evaluate import evaluate
    from qdebug.model.load import load_model

    quiet_transformers()
    result = evaluate(load_model(model, "cpu"), scenes, seed)
    typer.echo(f"exact captions: {result.exact}/{result.scenes} ({result.exact_rate:.1%})")
    typer.echo(f"attention peak in the shape's quadrant: {result.peak_in_quadrant}/{result.scenes} ({result.peak_rate:.1%})")
    for expected, got in result.misses[:10]:
        typer.echo(f"  expected {expected!r}, got {got!r}")


def main() -> None:
    """Entry point of the `qdebug` console script: usage errors become one line too."""
    usage_error = typer.BadParameter.__mro__[1]  # typer's vendored click UsageError (not exported by name)
    try:
        code = app(standalone_mode=False)
    except usage_error as exc:
        hint = f" (see `qdebug {exc.ctx.info_name} --help`)" if exc.ctx is not None and exc.ctx.info_name != "qdebug" else ""
        typer.echo(f"qdebug: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.echo("qdebug: error: interrupted", err=True)
        sys.exit(130)
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
