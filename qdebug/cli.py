"""The `qdebug` command line (Typer). Commands are thin: parse, call, render. Heavy imports stay inside."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from qdebug.errors import QDebugError
from qdebug.replay.fault_registry import Command, inject_help  # no torch: the --inject help is read from the registry
from qdebug.signals import Terminated, terminate_as_interrupt

app = typer.Typer(
    name="qdebug",
    help="A debugger for Qwen multimodal inference: stages, attention, replays of concurrent bursts, diffs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
demo_app = typer.Typer(help="The built-in demo Qwen2-VL model (trained on procedural scenes).", no_args_is_help=True)
app.add_typer(demo_app, name="demo")
export_app = typer.Typer(help="Export the model (ONNX) for `qdebug diff --onnx`.", no_args_is_help=True)
app.add_typer(export_app, name="export")

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="`demo`, a local HF checkpoint directory, or a hub id in the local HF cache.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto | cpu | cuda | cuda:N (auto = CUDA when present).")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="auto | float32 | bfloat16 | float16 (auto = bf16 on GPU, fp32 on CPU).")]
AttnKernelOpt = Annotated[str, typer.Option("--attn", help="Attention kernel every layer computes with: sdpa (default for attn, diff, repl: the model's own) | eager.")]


def _fail(message: str, code: int) -> None:
    from qdebug.shown import shown

    typer.echo(f"qdebug: error: {shown(message, None)}", err=True)  # a message may quote a server, a log or a file name
    raise typer.Exit(code)


def friendly(fn):
    """Map QDebugError to a one-line error and its exit code; Ctrl-C to exit 130, SIGTERM to 143. Never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with terminate_as_interrupt():
                return fn(*args, **kwargs)
        except QDebugError as exc:
            _fail(exc.message, exc.exit_code)
        except Terminated:
            _fail("terminated (SIGTERM); no output was written", 143)
        except KeyboardInterrupt:
            _fail("interrupted; no output was written (existing files are untouched)", 130)
        except MemoryError:
            _fail("out of memory (try a smaller --max-new-tokens, --dtype bfloat16 or a GPU)", 6)
        except RuntimeError as exc:
            if type(exc).__name__ != "OutOfMemoryError":  # torch.OutOfMemoryError; torch stays unimported here
                raise
            _fail("out of GPU memory (see `qdebug estimate`; try --layers none, fewer image tokens or --device-map auto)", 6)

    return wrapper


@app.command()
@friendly
def attn(
    image: Annotated[Path, typer.Argument(help="Image file (PNG, JPEG, ...), an audio clip (WAV, FLAC) for audio models, or a video (file or frame folder).")],
    prompt: Annotated[str, typer.Argument(help="Prompt text; put `<image>` where each image goes, or none to put images first.")],
    more_images: Annotated[Optional[list[Path]], typer.Option("--image", help="Another image for the same request (repeatable).")] = None,
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    attn_kernel: AttnKernelOpt = "sdpa",
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate (greedy).")] = 16,
    topk: Annotated[int, typer.Option("--topk", min=1, help="How many alternatives per token.")] = 5,
    layer: Annotated[Optional[int], typer.Option("--layer", help="Decoder layer for the heatmap (default: mean of layers).")] = None,
    head: Annotated[Optional[int], typer.Option("--head", help="Attention head (default: mean of heads).")] = None,
    token: Annotated[Optional[int], typer.Option("--token", help="Only this generation step's attention (default: all).")] = None,
    png: Annotated[Optional[Path], typer.Option("--png", help="Write heatmaps over the image to this PNG.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to PATH, or `-` for stdout.")] = None,
    save: Annotated[Optional[Path], typer.Option("--save", help="Save the full trace (.qdt) for `qdebug repl --trace` / `diff`.")] = None,
    tui: Annotated[bool, typer.Option("--tui", help="Open the result in the interactive debugger.")] = False,
    layers: Annotated[str, typer.Option("--layers", help="Decoder layers that record attention: all | none | 0,5,-1 | 0-3 (the others never compute weights).")] = "all",
    queries: Annotated[str, typer.Option("--queries", help="Prompt rows whose attention is kept: gen (last prompt position) | all | POS,... (generated tokens always).")] = "gen",
    keep: Annotated[Optional[list[str]], typer.Option("--keep", help="Keep more in the trace: `hidden` = every prompt row of every layer (default: stats + last row).")] = None,
    device_map: Annotated[Optional[str], typer.Option("--device-map", help="Spread the model over the visible GPUs with accelerate: auto | balanced | sequential.")] = None,
    audio: Annotated[Optional[list[Path]], typer.Option("--audio", help="An audio clip (WAV/FLAC) for audio models (repeatable).")] = None,
    video: Annotated[Optional[list[Path]], typer.Option("--video", help="A video (a file PyAV decodes, or a folder of frames in name order) for Qwen-VL models (repeatable).")] = None,
    fps: Annotated[Optional[float], typer.Option("--fps", help="Video frames sampled per second (default: a file's own rate; a frame folder is read as 2.0 fps, the processors' default).")] = None,
    max_frames: Annotated[Optional[int], typer.Option("--max-frames", min=1, help="At most this many video frames, spread evenly (default 64).")] = None,
    use_audio_in_video: Annotated[bool, typer.Option("--use-audio-in-video", help="Qwen2.5-Omni: each video's own sound is read too, interleaved with its frames in time.")] = False,
) -> None:
    """Run one request; show generated text, stage checks, top-k per token and attention over the image (or clip, or video)."""
    from qdebug.commands.attn import AttnArgs, run_attn, write_outputs
    from qdebug.commands.common import consoles, exit_status, progress, say_wrote
    from qdebug.outputs import OutputPlan

    for item in keep or []:
        if item != "hidden":
            _fail(f"--keep {item}: expected hidden", 2)
    args = AttnArgs([image, *(more_images or [])], prompt, model=model, device=device, dtype=dtype, attn_kernel=attn_kernel, max_new_tokens=max_new_tokens,
                    topk=topk, layer=layer, head=head, token=token, png=png, json_out=json_out, save=save, layers=layers, queries=queries,
                    keep_hidden="hidden" in (keep or []), device_map=device_map, prompt_logits=tui or save is not None, audio=list(audio or []),
                    videos=list(video or []), fps=fps, max_frames=max_frames, use_audio_in_video=use_audio_in_video)
    plan = OutputPlan({"--png": png, "--json": json_out, "--save": save}).check()  # before any model work
    report, status = consoles(json_to_stdout=json_out == "-")
    with progress(status, f"loading {model} and tracing…"):
        result = run_attn(args)
    with plan:
        write_outputs(args, result)
    if tui:
        from qdebug.tui.app import build_app

        build_app(trace=result.trace, source=f"qdebug attn {image}").run()
        raise typer.Exit(exit_status(result.trace.findings))
    from qdebug.render.attn_report import attn_renderables

    for renderable in attn_renderables(result):  # on stderr when stdout carries the JSON, terminal or not
        report.print(renderable)
    say_wrote(status, png, save, json_out)
    raise typer.Exit(exit_status(result.trace.findings))  # the one rule (commands/common.py): an ERROR finding is exit 1


@app.command()
@friendly
def replay(
    file: Annotated[Path, typer.Argument(help="A request capture (JSONL of chat-completions bodies), a runtime log (.gz too), or a log index folder (--index-only).")],
    more_files: Annotated[Optional[list[Path]], typer.Argument(help="More runtime logs (rotated files): merged in time order; or more index folders (hosts): read as one.", show_default=False)] = None,
    fmt: Annotated[Optional[str], typer.Option("--format", help="capture | runtime-log (default: detected).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="threads (N threads share one model) | batched (one padded batch).")] = "threads",
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", min=1, help="Threads running at once in threads mode (default 4); with --endpoint, requests in flight at once instead of the arrival_ts schedule.")] = None,
    inject: Annotated[str, typer.Option("--inject", help=inject_help(Command.REPLAY))] = "none",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the injected interleaving (same seed, same schedule).")] = 0,
    allow_paths: Annotated[bool, typer.Option("--allow-paths", help="Let image paths point outside the capture's folder.")] = False,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="`demo` (default), a local HF checkpoint directory, or a cached hub id; with --endpoint: also run local references.")] = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    attn_kernel: AttnKernelOpt = "eager",
    emit_log: Annotated[Optional[Path], typer.Option("--emit-log", help="Write the replay's events in the runtime-log format.")] = None,
    timeline_png: Annotated[Optional[Path], typer.Option("--timeline-png", help="Draw the offset timeline to this PNG.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the report as JSON to PATH, or `-` for stdout.")] = None,
    save: Annotated[Optional[Path], typer.Option("--save", help="Save the report with every trace (.qdr) for `repl`.")] = None,
    tui: Annotated[bool, typer.Option("--tui", help="Open the batch screen of the interactive debugger.")] = False,
    endpoint: Annotated[Optional[str], typer.Option("--endpoint", help="Replay against this OpenAI-compatible server (http://host:port, with or without /v1): each request alone, then the burst.")] = None,
    served_model: Annotated[Optional[str], typer.Option("--served-model", help="With --endpoint: the model name to send (default: the first of /v1/models).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="With --endpoint: environment variable holding the API key (sent only to the endpoint).")] = None,
    speed: Annotated[float, typer.Option("--speed", help="With --endpoint: compress the arrival_ts schedule by this factor.")] = 1.0,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="With --endpoint: run the burst this many times.")] = 1,
    timeout: Annotated[float, typer.Option("--timeout", help="With --endpoint: seconds for each whole answer to arrive.")] = 120.0,
    max_answer_mb: Annotated[float, typer.Option("--max-answer-mb", help="With --endpoint: the largest answer accepted, in MiB once decompressed.")] = 64.0,
    retries: Annotated[int, typer.Option("--retries", min=0, help="With --endpoint: retries on connection resets and 5xx.")] = 2,
    engine_traces_dir: Annotated[Optional[Path], typer.Option("--engine-traces", help="With --endpoint to a vLLM running qdebug's plugin: the folder it writes traces to (its QDEBUG_VLLM_TRACE_DIR); requests are tagged, and whose visual rows landed in each burst request inside the engine is checked against the answers.")] = None,
    engine_caches: Annotated[str, typer.Option("--engine-caches", help="With --endpoint to vLLM: fresh (default): the cold phases (alone, bursts) send new media identities (uuid) and a prefix-cache salt per run, phase and request, so no run reads another's cache entries, then a warm phase replays the capture with production caching; keep: every phase with production caching; cold: the cold phases only. With --engine-traces, every cache read is judged (cache_contaminated).")] = "fresh",
    since: Annotated[Optional[str], typer.Option("--since", help="Logs: only events at or after this ISO time.")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Logs: only events at or before this ISO time.")] = None,
    request: Annotated[Optional[str], typer.Option("--request", help="Logs: one request's whole story (its events and those naming it as donor).")] = None,
    kind: Annotated[Optional[list[str]], typer.Option("--kind", help="Logs: only events of a kind: overwrite | desync | shape | oob (repeatable).")] = None,
    jsonl: Annotated[Optional[str], typer.Option("--jsonl", help="Write the events as JSON Lines to PATH, or `-` for stdout.")] = None,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when a request's verdict is not ok or a finding is an error (reports only).")] = False,
    index_only: Annotated[bool, typer.Option("--index-only", help="Logs: only write their index (Parquet + manifest.json) to --out DIR, to ship and read later with `qdebug replay DIR...`.")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="With --index-only: the folder the index goes to.")] = None,
    host: Annotated[Optional[str], typer.Option("--host", help="With --index-only: the host name the index records (default: this machine's).")] = None,
) -> None:
    """Replay a captured burst (or read a runtime log) and show who got whose visual tokens, at which offsets, when.

    Exits 1 when a request's verdict is not ok: contaminated, desync, diverged or error; against an --endpoint also
    server_mismatch, batch_dependent or cache_contaminated; or when a finding is an error (unless --exit-zero).
    """
    if json_out == "-" and jsonl == "-":
        _fail("--json - and --jsonl - would both write to stdout (expected a file for one of them)", 2)
    files = [file, *(more_files or [])]
    from qdebug.commands.watch_findings import is_findings_log

    if is_findings_log(file):  # qdebug watch's findings log (docs/watch.md): its own path
        raise typer.Exit(_replay_findings_logs(files, index_only, out, host, json_out, exit_zero))
    if index_only or out is not None or host is not None:  # logs indexed to ship, not read
        raise typer.Exit(_replay_index_only(files, index_only, out, host))
    from qdebug.commands.common import consoles
    from qdebug.outputs import OutputPlan

    plan = OutputPlan({"--emit-log": emit_log, "--timeline-png": timeline_png, "--save": save, "--json": json_out, "--jsonl": jsonl}).check()
    report_console, status = consoles(json_to_stdout="-" in (json_out, jsonl))
    if endpoint is not None:
        from qdebug.commands.replay_endpoint import EndpointArgs, check_local_only_options, run_endpoint_replay

        check_local_only_options(mode, inject, seed)
        eargs = EndpointArgs(file=file, format=fmt, allow_paths=allow_paths, url=endpoint, served_model=served_model, api_key_env=api_key_env,
                             concurrency=concurrency, speed=speed, repeat=repeat, timeout=timeout, retries=retries, max_answer_mb=max_answer_mb, model=model, device=device,
                             dtype=dtype, attn_kernel=attn_kernel, engine_traces=engine_traces_dir, engine_caches=engine_caches)
        with terminate_as_interrupt() as terminated:
            report = run_endpoint_replay(eargs, status)
    else:
        from qdebug.commands.log_replay import make_filter
        from qdebug.commands.replay import ReplayArgs, run_replay

        if engine_caches != "fresh":
            _fail("--engine-caches chooses what a replay against a server sends (expected --endpoint URL with it)", 2)
        if engine_traces_dir is not None:
            _fail("--engine-traces reads a vLLM server's traces of the requests --endpoint sends (expected --endpoint URL with it)", 2)
        args = ReplayArgs(file=file, format=fmt, mode=mode, concurrency=concurrency or 4, inject=inject, seed=seed, allow_paths=allow_paths,
                          model=model or "demo", device=device, dtype=dtype, attn_kernel=attn_kernel, more_files=tuple(more_files or ()),
                          log_filter=make_filter(since, until, request, kind))
        with terminate_as_interrupt() as terminated:
            report = run_replay(args, status)
    _replay_outputs(report, terminated, plan, emit_log, timeline_png, save, json_out, jsonl, tui, report_console, status)
    if endpoint is not None and engine_traces_dir is not None:
        from qdebug.commands.endpoint_engine import cannot_compare

        if cannot_compare(report):  # asked for the engine's evidence, read none: not a clean run (exit 5, even with --exit-zero)
            _fail(cannot_compare(report), 5)
    if not exit_zero:  # a gate for CI or a canary: 1 when this replay found a problem
        from qdebug.commands.common import exit_status
        from qdebug.commands.replay import found_problems

        raise typer.Exit(exit_status(report.findings, found_problems(report)))


def _replay_findings_logs(files: list[Path], index_only: bool, out: Optional[Path], host: Optional[str], json_out: Optional[str],
                          exit_zero: bool) -> int:
    """`qdebug replay` on watch findings logs: shown (exit 1 on a violation), or indexed with --index-only."""
    from qdebug.commands.common import consoles
    from qdebug.commands.watch_findings import findings_command

    report_console, status = consoles(json_to_stdout=json_out == "-")
    return findings_command(files, index_only, out, host, json_out, exit_zero, report_console, status)


def _replay_index_only(files: list[Path], index_only: bool, out: Optional[Path], host: Optional[str]) -> int:
    """`qdebug replay --index-only LOG... --out DIR`: the logs' index written to ship, nothing judged."""
    from qdebug.commands.common import consoles
    from qdebug.commands.log_replay import index_only_command

    return index_only_command(files, index_only, out, host, consoles(json_to_stdout=False)[1])


def _replay_outputs(report: Any, terminated: Any, plan: Any, emit_log: Optional[Path], timeline_png: Optional[Path], save: Optional[Path],
                    json_out: Optional[str], jsonl: Optional[str], tui: bool, report_console: Any, status: Any) -> None:
    """A replay's report written to every file asked for, then shown (the TUI, or the Rich report); an interrupted
    replay says what its files hold and exits 130 (Ctrl-C) or 143 (SIGTERM)."""
    from qdebug.commands.common import say_wrote
    from qdebug.commands.replay import prompt_after_sigterm, write_replay_outputs
    from qdebug.render.replay_json import write_events_jsonl, write_report_json

    written = prompt_after_sigterm(report) if terminated.is_set() else report
    with plan:
        write_replay_outputs(written, emit_log, timeline_png, save)
        write_report_json(written, json_out)
        if jsonl is not None:
            write_events_jsonl(written, jsonl)
    if tui:
        from qdebug.tui.app import build_app

        build_app(report=report).run()
    else:  # on stderr when stdout carries JSON, terminal or not
        from qdebug.render.replay_report import replay_renderables

        for renderable in replay_renderables(report):
            report_console.print(renderable)
        if report.kind == "runtime-log":
            status.print(f"{report.unknown_lines:,} unrecognised line(s) kept and counted")
    say_wrote(status, emit_log, timeline_png, save, json_out, jsonl)
    if report.interrupted:
        from qdebug.render.data_text import data
        from qdebug.render.replay_report import interrupted_note

        status.print(data(interrupted_note(report, "terminated" if terminated.is_set() else "interrupted")))
        if written is not report and (json_out or jsonl or emit_log):
            status.print("SIGTERM asks for a prompt stop: the files hold the requests, events and findings kept in memory "
                          f"(up to {len(report.events):,} events); Ctrl-C, or a run to the end, writes all that was read")
        raise typer.Exit(143 if terminated.is_set() else 130)

@app.command()
@friendly
def diff(
    first: Annotated[str, typer.Argument(help="IMAGE (then PROMPT), or a saved trace A.qdt.")],
    second: Annotated[str, typer.Argument(help="PROMPT, or a saved trace B.qdt.")],
    vary: Annotated[str, typer.Option("--vary", help="What B changes: none | paths (token ids vs inputs_embeds) | dtype | attn (eager vs sdpa) | device (cpu vs cuda).")] = "none",
    order: Annotated[str, typer.Option("--order", help="image-first | audio-first | text-first | both: where the image (or clip) goes in the message.")] = "image-first",
    inject: Annotated[Optional[str], typer.Option("--inject", help=inject_help(Command.DIFF))] = None,
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    attn_kernel: AttnKernelOpt = "sdpa",
    a_dtype: Annotated[Optional[str], typer.Option("--a-dtype", help="dtype of run A (with --vary dtype: default float32).")] = None,
    b_dtype: Annotated[Optional[str], typer.Option("--b-dtype", help="dtype of run B (with --vary dtype: default bfloat16).")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate (greedy).")] = 16,
    atol: Annotated[Optional[float], typer.Option("--atol", help="Absolute tolerance (default by dtype).")] = None,
    rtol: Annotated[Optional[float], typer.Option("--rtol", help="Relative tolerance (default by dtype).")] = None,
    png: Annotated[Optional[Path], typer.Option("--png", help="Write the per-stage divergence plot to this PNG.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the comparison as JSON to PATH, or `-` for stdout.")] = None,
    more_images: Annotated[Optional[list[str]], typer.Option("--image", help="Another image for the same request (repeatable).")] = None,
    onnx: Annotated[Optional[str], typer.Option("--onnx", help="B = this ONNX export (a `qdebug export onnx` directory or a mapping file) in onnxruntime; A = PyTorch.")] = None,
    engine: Annotated[Optional[str], typer.Option("--engine", help="B = a vLLM server running qdebug's plugin (URL); A = the same checkpoint (--model) in transformers.")] = None,
    engine_traces: Annotated[Optional[str], typer.Option("--engine-traces", help="The folder that server writes traces to (its QDEBUG_VLLM_TRACE_DIR); without it, fetched from the server (VLLM_PLUGINS=qdebug).")] = None,
    served_model: Annotated[Optional[str], typer.Option("--served-model", help="With --engine: the model name to ask for (default: the server's first).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="With --engine: environment variable holding the API key.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="With --engine: seconds to wait for the answer and for its trace.")] = 120.0,
    fps: Annotated[Optional[float], typer.Option("--fps", help="With a video: frames sampled per second (default: a file's own rate; a frame folder is read as 2.0 fps).")] = None,
    max_frames: Annotated[Optional[int], typer.Option("--max-frames", min=1, help="With a video: at most this many frames, spread evenly (default 64).")] = None,
) -> None:
    """Find the first stage where two runs that should agree part (two input paths, dtypes, kernels, devices, an engine, or two saved traces)."""
    from qdebug.commands.common import consoles, emit_json, exit_status, progress, say_wrote
    from qdebug.commands.diff import run_diff
    from qdebug.commands.diff_args import DiffArgs
    from qdebug.outputs import OutputPlan

    args = DiffArgs(first, second, vary=vary, order=order, inject=inject, model=model, device=device, dtype=dtype, attn_kernel=attn_kernel, a_dtype=a_dtype,
                    b_dtype=b_dtype, max_new_tokens=max_new_tokens, atol=atol, rtol=rtol, images=list(more_images or []), onnx=onnx,
                    engine=engine, engine_traces=engine_traces, served_model=served_model, api_key_env=api_key_env, timeout=timeout,
                    fps=fps, max_frames=max_frames)
    plan = OutputPlan({"--png": png, "--json": json_out}).check()
    report, status = consoles(json_to_stdout=json_out == "-")
    with progress(status, "running both sides…"):
        run = run_diff(args)
    with plan:
        if png is not None:
            from qdebug.commands.diff import write_diff_png

            write_diff_png(run, png)
        emit_json(run.to_json(), json_out)
    from qdebug.render.diff_report import diff_report

    for renderable in diff_report(run, onnx=onnx is not None):  # on stderr when stdout carries the JSON, terminal or not
        report.print(renderable)
    say_wrote(status, png, json_out)
    raise typer.Exit(exit_status([f for c in run.comparisons for f in c.result.findings], run.parted))


@export_app.command("onnx")
@friendly
def export_onnx(
    out: Annotated[Path, typer.Option("--out", help="New (or empty) directory for vision.onnx, prefill.onnx and qdebug-onnx.json.")],
    model: ModelOpt = "demo",
    inject: Annotated[Optional[list[str]], typer.Option("--inject", help="Break the export on purpose (repeatable): transpose-weight:layer.L.mlp | transpose-weight:layer.L.attn | mrope-text-only | drop-deepstack.")] = None,
    opset: Annotated[Optional[int], typer.Option("--opset", min=18, help="ONNX opset (default: the exporter's).")] = None,
) -> None:
    """Export the model as ONNX the way real exports are split: vision encoder + language-model prefill (every layer's output exposed)."""
    from qdebug.commands.common import consoles, progress
    from qdebug.commands.export import ExportArgs, run_export_onnx
    from qdebug.render.data_text import data
    from qdebug.render.export_report import export_lines

    status = consoles(json_to_stdout=False)[1]
    with progress(status, f"exporting {model}…"):
        result = run_export_onnx(ExportArgs(out=out, model=model, inject=inject, opset=opset))
    for line in export_lines(result):
        status.print(data(line, limit=None))


@app.command()
@friendly
def repl(
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    attn_kernel: AttnKernelOpt = "sdpa",
    images: Annotated[Optional[list[Path]], typer.Option("--image", help="Pre-fill the request with this image (repeatable).")] = None,
    prompt: Annotated[Optional[str], typer.Option("--prompt", help="Pre-fill the request's prompt.")] = None,
    trace: Annotated[Optional[Path], typer.Option("--trace", help="Open a saved trace (.qdt), or a replay report (.qdr: the batch screen), without loading any model.")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate (greedy).")] = 16,
) -> None:
    """Open the interactive debugger: step a request through its stages, see offsets, attention and top-k."""
    from qdebug.trace.request import load_image

    opened = [load_image(path) for path in images or []]  # fail before the UI opens

    def check_fits() -> None:  # in the app's model loader: it imports torch, seconds the first frame need not wait
        from qdebug.trace.estimate import refuse_if_too_big

        refuse_if_too_big(model, device, dtype, images=opened, image_tokens=None if opened else 1024, max_new_tokens=max_new_tokens)

    from qdebug.model.choice import ModelChoice
    from qdebug.tui.app import build_app

    if trace is not None:
        from qdebug.replay.report import ReplayReport
        from qdebug.tui.files import load_document

        doc = load_document(trace)  # a replay report given to --trace opens the batch screen
        tui = build_app(report=doc, source=str(trace)) if isinstance(doc, ReplayReport) else build_app(trace=doc, source=str(trace))
    else:
        tui = build_app(model_spec=ModelChoice(model=model, device=device, dtype=dtype, attn_kernel=attn_kernel), image_paths=list(images or []),
                        prompt=prompt, max_new_tokens=max_new_tokens, before_load=check_fits)
    tui.run()


@app.command()
@friendly
def estimate(
    model: ModelOpt = "demo",
    image_tokens: Annotated[int, typer.Option("--image-tokens", min=0, help="Visual tokens of the request (1,024 = one 896×896 image on Qwen2-VL).")] = 1024,
    dtype: DtypeOpt = "auto",
    device: DeviceOpt = "auto",
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Tokens to generate.")] = 16,
    layers: Annotated[str, typer.Option("--layers", help="Layers that record attention, as for `attn`.")] = "all",
    queries: Annotated[str, typer.Option("--queries", help="Kept prompt rows, as for `attn`: gen | all.")] = "gen",
    keep: Annotated[Optional[list[str]], typer.Option("--keep", help="`hidden`: every prompt row of every layer.")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the estimate as JSON to PATH, or `-` for stdout.")] = None,
) -> None:
    """From config.json alone (meta device, no weights read): parameters, weight memory, trace size and what tracing adds."""
    from qdebug.commands.common import emit_json, say_wrote
    from qdebug.commands.estimate import EstimateArgs, run_estimate
    from qdebug.render.estimate_report import estimate_lines
    from qdebug.shown import shown

    est = run_estimate(EstimateArgs(model=model, image_tokens=image_tokens, dtype=dtype, device=device, max_new_tokens=max_new_tokens,
                                    layers=layers, queries=queries, keep_hidden="hidden" in (keep or [])))
    emit_json(est.to_json(), json_out)
    for line in estimate_lines(est):
        typer.echo(shown(line), err=json_out == "-")  # stdout carries the JSON alone
    say_wrote(None, json_out)


@app.command()
@friendly
def serve(
    model: ModelOpt = "demo",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    attn_kernel: AttnKernelOpt = "eager",
    host: Annotated[str, typer.Option("--host", help="Address to bind (default loopback only; 0.0.0.0 exposes it).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    traces: Annotated[Optional[Path], typer.Option("--traces", help="Save every answered request's trace (.qdt) and an index.jsonl here.")] = None,
    inject: Annotated[str, typer.Option("--inject", help=inject_help(Command.SERVE))] = "none",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the injected interleaving.")] = 0,
    served_model: Annotated[Optional[str], typer.Option("--served-model", help="Model name in /v1/models and answers (default qdebug-demo, or --model).")] = None,
    wave_window: Annotated[float, typer.Option("--wave-window", help="shared-visual-buffer: seconds within which requests share the buffer.")] = 0.5,
    max_body_mb: Annotated[float, typer.Option("--max-body-mb", help="Largest request body accepted, in MiB (larger: HTTP 413).")] = 64.0,
    max_connections: Annotated[int, typer.Option("--max-connections", help="Open connections served at once (more: HTTP 503).")] = 256,
    request_timeout: Annotated[float, typer.Option("--request-timeout", help="Seconds for a request to arrive whole (slower: HTTP 408, closed).")] = 120.0,
) -> None:
    """Serve a model over HTTP (OpenAI chat completions), tracing every request; optionally with an injected fault."""
    from qdebug.commands.serve import ServeArgs, run_serve

    run_serve(ServeArgs(model=model, device=device, dtype=dtype, attn_kernel=attn_kernel, host=host, port=port, traces=traces, inject=inject, seed=seed,
                        served_model=served_model, wave_window=wave_window, max_body_mb=max_body_mb, max_connections=max_connections,
                        request_timeout=request_timeout))


@app.command()
@friendly
def watch(
    source: Annotated[str, typer.Argument(help="A vLLM server's URL (its /metrics) or its QDEBUG_VLLM_WATCH_DIR.", metavar="URL_OR_DIR")],
    findings: Annotated[Optional[str], typer.Option("--findings", help="With a URL: the server's QDEBUG_VLLM_WATCH_DIR, for its findings log.")] = None,
    once: Annotated[bool, typer.Option("--once", help="Read once, print (or write --json) and exit: 1 when violations exist.")] = False,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the snapshot as JSON to PATH, or `-` for stdout (implies --once).")] = None,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between readings in the live view.")] = 2.0,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds a whole reading may take: the /metrics answer, the folder's files.")] = 10.0,
    max_mb: Annotated[float, typer.Option("--max-mb", help="The largest /metrics answer (MiB, once decompressed) and findings-log file read.")] = 64.0,
) -> None:
    """What qdebug's watch mode inside vLLM (QDEBUG_VLLM_WATCH=1) counted and found: checks placement, counts, positions,
    encoder_batch, layout, logits, cache. A live view, or --once for scripts."""
    from qdebug.commands.common import emit_json, say_wrote
    from qdebug.commands.watch import WatchArgs, check_source, read_snapshot
    from qdebug.outputs import OutputPlan

    args = WatchArgs(source=source, findings=findings, timeout=timeout, max_mb=max_mb)
    check_source(args)
    OutputPlan({"--json": json_out}).check()
    if not once and json_out is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            _fail("the live view needs a terminal (expected --once, or --json PATH, for a script or a pipe)", 2)
        from qdebug.tui.watch_app import build_watch_app

        build_watch_app(args, interval).run()
        return
    doc = read_snapshot(args).to_json()
    emit_json(doc, json_out)
    if json_out != "-":
        from qdebug.render.watch_report import watch_lines

        from qdebug.shown import shown

        typer.echo("\n".join(shown(line) for line in watch_lines(doc)))  # a server's findings: ids and evidence are data
    say_wrote(None, json_out)
    if doc["violations"]:
        raise typer.Exit(1)


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
    typer.echo(f"exact captions: {result.exact:d}/{result.scenes:d} ({result.exact_rate:.1%})")
    typer.echo(f"attention peak in the shape's quadrant: {result.peak_in_quadrant:d}/{result.scenes:d} ({result.peak_rate:.1%})")
    for expected, got in result.misses[:10]:
        typer.echo(f"  expected {expected!r}, got {got!r}")


def main() -> None:
    """Entry point of the `qdebug` console script: usage errors become one line too."""
    usage_error: Any = typer.BadParameter.__mro__[1]  # typer's vendored click UsageError (not exported by name)
    try:
        code = app(standalone_mode=False)
    except usage_error as exc:
        names: list[str] = []
        ctx = exc.ctx
        while ctx is not None and ctx.parent is not None:  # the subcommand's path below `qdebug` ("export onnx")
            names.insert(0, ctx.info_name)
            ctx = ctx.parent
        hint = f" (see `qdebug {' '.join(names)} --help`)" if names else ""
        from qdebug.shown import shown

        typer.echo(f"qdebug: error: {shown(exc.format_message(), None)}{hint}", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.echo("qdebug: error: interrupted", err=True)
        sys.exit(130)
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
