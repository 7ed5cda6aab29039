"""Statements of the documentation held to the code they describe: the exit-code table (docs/commands/index.md and
the README's sentence) against the QDebugError family and the CLI's interrupt codes, the demo model's page against
its shipped config.json and size."""

from __future__ import annotations

import inspect
import json
import re

import qdebug.errors as errors
from tests.docs_text import DOCS, ROOT

CHECKPOINT = ROOT / "qdebug" / "demo" / "checkpoint"


def _table_codes() -> dict[int, str]:
    """code → meaning, from the exit-code table of docs/commands/index.md ("130 / 143" gives both)."""
    text = (DOCS / "commands" / "index.md").read_text(encoding="utf-8").split("## Exit codes", 1)[1]
    codes = {}
    for first, second, meaning in re.findall(r"^\|\s*(\d+)(?:\s*/\s*(\d+))?\s*\|\s*(.+?)\s*\|\s*$", text, re.M):
        codes[int(first)] = meaning
        if second:
            codes[int(second)] = meaning
    return codes


def test_the_exit_code_table_is_the_error_familys_codes():
    """Every code an error class exits with is in the table, and every table code but 0 and the interrupts is one."""
    family = {cls.exit_code for cls in vars(errors).values() if inspect.isclass(cls) and issubclass(cls, errors.QDebugError)}
    assert errors.UnreachableError.exit_code == 6 and errors.IncompatibleTracesError.exit_code == 5
    table = _table_codes()
    assert family <= set(table), f"codes missing from the table: {family - set(table)}"
    assert set(table) - family == {0, 130, 143}, set(table) - family
    assert "Ctrl-C" in table[130] and "SIGTERM" in table[143]
    cli = (ROOT / "qdebug" / "cli.py").read_text(encoding="utf-8")
    assert "143 if terminated.is_set() else 130" in cli  # the interrupt codes the table names are the CLI's


def test_the_readme_lists_the_same_exit_codes():
    """The README's one-sentence summary names each code of the table, in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sentence = " ".join(readme.split("Exit codes are", 1)[1].split("[commands]", 1)[0].split())
    named = [int(n) for n in re.findall(r"\b(\d+)(?=[ /])", sentence)]
    assert named == sorted(_table_codes()), named


def test_the_demo_model_page_describes_the_shipped_checkpoint():
    """Layers, width, heads, vision blocks, patch, merge and size on docs/demo-model.md are the checkpoint's."""
    page = " ".join((DOCS / "demo-model.md").read_text(encoding="utf-8").split())
    config = json.loads((CHECKPOINT / "config.json").read_text(encoding="utf-8"))
    text, vision = config.get("text_config", config), config["vision_config"]
    said = re.search(r"\(`(\w+)`, (\d+) decoder layers of width (\d+) with (\d+) query / (\d+) key-value heads, "
                     r"a (\d+)-block vision tower, patch (\d+), merge (\d+);.*?about ([\d.]+) MB\)", page)
    assert said, "the demo model page no longer describes the checkpoint in the form this test reads"
    arch, layers, width, heads, kv, blocks, patch, merge, mb = said.groups()
    assert arch in config["architectures"]
    assert [int(layers), int(width), int(heads), int(kv)] == [text["num_hidden_layers"], text["hidden_size"],
                                                              text["num_attention_heads"], text["num_key_value_heads"]]
    assert [int(blocks), int(patch), int(merge)] == [vision["depth"], vision["patch_size"], vision["spatial_merge_size"]]
    size = sum(path.stat().st_size for path in CHECKPOINT.iterdir() if path.is_file())
    assert round(size / 1e6, 1) == float(mb), size


def _page(name: str) -> str:
    """A command page's text with its line breaks and runs of spaces as single spaces."""
    return " ".join((DOCS / "commands" / name).read_text(encoding="utf-8").split())


def _options(path: str) -> dict:
    """`--option` → its click parameter, for the command at `path` ("export onnx", "attn")."""
    import typer

    from qdebug.cli import app

    command = typer.main.get_command(app)
    for name in path.split():
        command = command.commands[name]
    return {opt: param for param in command.params for opt in param.opts if opt.startswith("--")}


# (page, the page's words, command, option, the default the words state)
DEFAULTS = [
    ("attn.md", "tokens to generate, greedy (default 16)", "attn", "--max-new-tokens", 16),
    ("attn.md", "alternatives shown per token (default 5)", "attn", "--topk", 5),
    ("attn.md", "(default `sdpa` for attn, diff and repl; replay keeps `eager`)", "attn", "--attn", "sdpa"),
    ("attn.md", "(default `sdpa` for attn, diff and repl; replay keeps `eager`)", "diff", "--attn", "sdpa"),
    ("attn.md", "(default `sdpa` for attn, diff and repl; replay keeps `eager`)", "repl", "--attn", "sdpa"),
    ("attn.md", "(default `sdpa` for attn, diff and repl; replay keeps `eager`)", "replay", "--attn", "eager"),
    ("replay.md", "`--mode threads` (default:", "replay", "--mode", "threads"),
    ("replay.md", "(`--retries`, default 2)", "replay", "--retries", 2),
    ("replay.md", "`--max-answer-mb N` (default 64)", "replay", "--max-answer-mb", 64),
    ("replay.md", "`--engine-caches fresh` (the default)", "replay", "--engine-caches", "fresh"),
    ("serve.md", "Binds to 127.0.0.1 unless `--host` says otherwise", "serve", "--host", "127.0.0.1"),
    ("serve.md", "`--max-body-mb` (default 64)", "serve", "--max-body-mb", 64),
    ("serve.md", "`--max-connections` (default 256)", "serve", "--max-connections", 256),
    ("serve.md", "`--request-timeout` seconds (default 120)", "serve", "--request-timeout", 120),
    ("serve.md", "--port 8000", "serve", "--port", 8000),
    ("demo.md", "`demo train [--steps 5000] [--seed 1234]", "demo train", "--steps", 5000),
    ("demo.md", "`demo train [--steps 5000] [--seed 1234]", "demo train", "--seed", 1234),
    ("demo.md", "`demo eval [--scenes 200]`", "demo eval", "--scenes", 200),
]


def test_the_defaults_the_command_pages_state_are_the_clis():
    """Each default a command page states is the one the command's option has (the page still says it, in those words)."""
    wrong = []
    for page, words, command, option, value in DEFAULTS:
        assert words in _page(page), f"{page} no longer says {words!r}"
        default = _options(command)[option].default
        if default != value:
            wrong.append(f"{page}: {command} {option} defaults to {default!r}, the page says {value!r}")
    assert not wrong, wrong


def test_the_commands_the_index_page_names_take_model_device_and_dtype():
    """docs/commands/index.md: the commands that run a model and estimate take all three; export onnx and demo eval only --model."""
    page = _page("index.md")
    said = re.search(r"The commands that run a model \(([^)]*)\) and `estimate` take `--model", page)
    assert said, "index.md no longer names the commands that take --model, --device and --dtype"
    commands = re.findall(r"`([\w ]+)`", said.group(1)) + ["estimate"]
    assert commands == ["attn", "diff", "replay", "repl", "serve", "estimate"], commands
    for command in commands:
        assert {"--model", "--device", "--dtype"} <= set(_options(command)), command
    assert "`export onnx` and `demo eval` take `--model` only" in page
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "The commands that run a model take `--model demo|DIR|HUB_ID`, `--device` and `--dtype`" in readme
    assert "Every command takes" not in readme
    for command in ("export onnx", "demo eval"):
        options = set(_options(command))
        assert "--model" in options and not {"--device", "--dtype"} & options, (command, options)


def _number(text: str) -> float:
    """A number as the pages write it: 1e-6, 2⁻¹¹."""
    power = re.fullmatch(r"2([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)", text)
    if power:
        digits = power.group(1).translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))
        return 2.0 ** int(digits)
    return float(text)


def test_the_diff_pages_tolerances_are_the_codes():
    """docs/commands/diff.md's (atol, rtol) per dtype and its per-element rule; onnx.md's ONNX tolerance."""
    import torch

    from qdebug.analysis.onnx_findings import ONNX_TOLERANCE
    from qdebug.analysis.tolerances import tolerance_for

    page = _page("diff.md")
    assert "`|a−b| <= atol + rtol·max(|a|, mean |a| of its row)`" in page
    table = re.search(r"\(atol, rtol\) = \((\S+), (\S+)\) for float32, \((\S+), (\S+)\) for float16 and \((\S+), (\S+)\) for bfloat16", page)
    assert table, "diff.md no longer states the tolerances in the form this test reads"
    numbers = [_number(n) for n in table.groups()]
    for dtype, (atol, rtol) in zip(("float32", "float16", "bfloat16"), zip(numbers[::2], numbers[1::2])):
        tol = tolerance_for(dtype, dtype)
        assert (tol.atol, tol.rtol) == (atol, rtol), dtype
    assert tolerance_for("float32", "bfloat16") == tolerance_for("bfloat16", "bfloat16")  # the less precise of the pair
    # the rule is per element, the scale floored by the row's mean |a|: a whole-tensor max|a| would let the 1e4
    # channel of row 0 hide the 0.05 in row 1's ordinary value
    tol = tolerance_for("float32", "float32")
    a = torch.ones(2, 1000)
    a[0, 0] = 1e4
    b = a.clone()
    b[1, 5] += 0.05
    assert tol.allows(0.05, float(a.abs().max())) and bool((tol.excess(a, b) > 0).any())
    onnx = _page("onnx.md")
    said = re.search(r"ONNX tolerance, element by element as in `diff`: `\|a−b\| <= (\S+) \+ (\S+)·max\(\|a\|, mean \|a\| of its row\)`", onnx)
    assert said and (_number(said.group(1)), _number(said.group(2))) == ONNX_TOLERANCE, said


def test_the_log_cache_is_where_the_runtime_logs_page_says(monkeypatch, tmp_path):
    """$QDEBUG_CACHE_DIR, else $XDG_CACHE_HOME/qdebug/logs, else ~/.cache/qdebug/logs."""
    from pathlib import Path

    from qdebug.replay.log_index import cache_dir

    assert "`$QDEBUG_CACHE_DIR` when it is set, else `$XDG_CACHE_HOME/qdebug/logs` or `~/.cache/qdebug/logs`" in _page("runtime-logs.md")
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "q"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "q"
    monkeypatch.delenv("QDEBUG_CACHE_DIR")
    assert cache_dir() == tmp_path / "x" / "qdebug" / "logs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == Path(tmp_path / "home" / ".cache" / "qdebug" / "logs")


def test_log_chunks_are_recognised_one_thread_per_core_at_most_8(monkeypatch):
    """runtime-logs.md: "recognised in worker threads, one per core (at most 8)"; one core scans in the reading thread."""
    import os

    from qdebug.replay.formats.log_pool import ChunkPool

    assert "recognised in worker threads, one per core (at most 8)" in _page("runtime-logs.md")
    for cores, workers in ((1, 0), (2, 2), (16, 8)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert ChunkPool(True).workers == workers


def test_the_dense_matrix_is_written_for_captures_of_at_most_256_requests():
    """runtime-logs.md: the dense `contamination.matrix` only for a replayed capture of at most 256 requests."""
    from qdebug.replay.report import ReplayReport

    assert "the dense `contamination.matrix` is written only for a replayed capture of at most 256 requests" in _page("runtime-logs.md")
    for n, kind, dense in ((256, "capture", True), (257, "capture", False), (3, "runtime-log", False)):
        ids = [str(i) for i in range(n)]
        report = ReplayReport(source="x", kind=kind, contamination_ids=ids, contamination=[[0.0] * n for _ in ids])
        assert (report.to_json()["contamination"]["matrix"] is not None) == dense, (n, kind)


def test_the_colourless_ramps_are_the_repl_pages():
    """repl.md: without colour the heatmap is the ramp ` .:-=+*#%@`, the image beside it shade blocks ` ░▒▓█`, none of
    the heatmap's symbols."""
    from qdebug.render.heatmap import IMAGE_RAMP, RAMP

    page = _page("repl.md")
    assert f"the heatmap is a character ramp `{RAMP}` in a frame" in page
    assert f"the image beside it is drawn in shade blocks `{IMAGE_RAMP}`, none of the heatmap's symbols" in page
    assert not (set(RAMP) - {" "}) & set(IMAGE_RAMP)


def test_the_replay_pages_inject_row_lists_replays_presets():
    """replay.md's `--inject` row names exactly the presets `qdebug replay --inject` accepts."""
    from qdebug.replay.fault_registry import Command, presets

    row = re.search(r"\| `--inject ([^`]+)` \|", _page("replay.md"))
    assert row, "replay.md's --inject row is no longer in the form this test reads"
    listed = {spec.split(":")[0] for spec in row.group(1).replace("\\|", "|").split("|")}
    assert listed == {p.name for p in presets(Command.REPLAY)}, listed


def _demo_page() -> str:
    return " ".join((DOCS / "demo-model.md").read_text(encoding="utf-8").split())


def test_the_demo_model_page_describes_its_training_scenes():
    """Light-grey canvas, sides the multiples of 28 from 84 to 224, four colours, three shapes, four quadrants and the
    caption's form are qdebug.demo.scenes'."""
    import random

    from qdebug.demo import scenes

    page = _demo_page()
    said = re.search(r"a light-grey image, each side a multiple of 28 between (\d+) and (\d+) pixels, with one "
                     r"(\w+), (\w+), (\w+) or (\w+) (\w+), (\w+) or (\w+) in one quadrant; the caption is `([^`]+)`", page)
    assert said, "demo-model.md no longer describes the scenes in the form this test reads"
    low, high, *words, caption = said.groups()
    assert scenes.SIDES == tuple(range(int(low), int(high) + 1, 28))
    assert set(words[:4]) == set(scenes.COLOURS) and set(words[4:]) == set(scenes.SHAPES) and len(scenes.QUADRANTS) == 4
    assert caption == "a {colour} {shape} in the {quadrant}" and scenes.caption_for("red", "circle", "top left") == "a red circle in the top left"
    assert len(set(scenes.BACKGROUND)) == 1 and min(scenes.BACKGROUND) >= 200  # a light grey
    scene = scenes.make_scene(random.Random(0))
    assert scene.image.getpixel((0, 0)) == scenes.BACKGROUND or scene.image.getpixel((scene.image.width - 1, scene.image.height - 1)) == scenes.BACKGROUND


def test_the_demo_model_pages_sample_table_is_the_sample_data():
    """Each scene's size and visual-token count (one per 28×28 block: patch 14, merge 2), named for what it shows; the
    capture's 14 requests of 9 sizes (12 files, 2 data: URLs), 12 with `observed`; the sample files named exist."""
    import base64
    import io

    from PIL import Image

    page = _demo_page()
    sample = ROOT / "sample_data"
    rows = re.findall(r"\| `sample_data/(\w+)\.png` \| (\d+)×(\d+) scene: an? (\w+) (\w+) in the (\w+ \w+) \((\d+) visual tokens\) \|", page)
    assert len(rows) == len(list(sample.glob("*.png"))) == 6, rows
    for name, width, height, colour, shape, quadrant, tokens in rows:
        image = Image.open(sample / f"{name}.png")
        assert image.size == (int(width), int(height)), name
        assert (image.width // 28) * (image.height // 28) == int(tokens), name
        assert name == f"{colour}_{shape}_{quadrant.replace(' ', '_')}"
    for named in re.findall(r"\| `sample_data/([\w.]+)` \|", page):
        assert (sample / named).is_file(), named
    lines = [json.loads(line) for line in (sample / "capture.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    urls = [part["image_url"]["url"] for line in lines for m in line["messages"] if not isinstance(m["content"], str)
            for part in m["content"] if part.get("type") == "image_url"]
    data = [u for u in urls if u.startswith("data:")]
    sizes = {Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).size for u in data}
    sizes |= {Image.open(path).size for path in (sample / "capture").glob("*.png")}
    counts = (len(lines), len(sizes), len(list((sample / "capture").glob("*.png"))), len(data), sum("observed" in line for line in lines))
    assert "a 14-request burst (scenes of 9 sizes: 12 images under `capture/`, two as data: URLs)" in page
    assert "(12 of 14 lines)" in page
    assert counts == (14, 9, 12, 2, 12), counts


def test_the_demo_model_pages_burst_log_row_is_what_replay_finds():
    """burst.log: 8 requests 41–48, 42 ← 43 and 45 ← 46 contaminated, 44 and 47 not, two desyncs, the shape mismatch
    at 46, the index error at 47 and 19 unrecognised lines, as `qdebug replay --json` reads it."""
    import subprocess

    assert ("a runtime log of 8 requests (41–48): 42 overwritten by 43 and 45 by 46 before their sync (contaminated), "
            "44 overwriting its own buffer and 47 overwritten after its sync (not contamination), two "
            "`TokenStreamDesyncWarning`s, a `VisualEmbeddingShapeMismatchError` (46), a `CrossAttentionIndexOutOfBounds` "
            "(47), and 19 lines qdebug does not recognise") in _demo_page()
    run = subprocess.run(["qdebug", "replay", str(ROOT / "sample_data" / "burst.log"), "--json", "-"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr  # findings of error severity
    report = json.loads(run.stdout)
    requests = {r["id"]: r for r in report["requests"]}
    assert list(requests) == [str(n) for n in range(41, 49)]
    contaminated = {rid: r["donor"] for rid, r in requests.items() if r["verdict"] == "contaminated"}
    assert contaminated == {"42": "43", "45": "46"}
    kinds = [(f["kind"], f["request_id"]) for f in report["findings"]]
    assert sum(kind == "desync" for kind, _ in kinds) == 2
    assert ("shape_mismatch", "46") in kinds and ("index_out_of_bounds", "47") in kinds
    assert not any(kind == "contamination" and rid in ("44", "47") for kind, rid in kinds)
    assert report["unknown_lines"] == 19
    assert "TokenStreamDesyncWarning" in (ROOT / "sample_data" / "burst.log").read_text(encoding="utf-8")


def test_demo_eval_prints_the_two_rates_the_page_names():
    """demo.md: `demo eval` prints an exact-caption line and a peak-in-quadrant line, in the form the page quotes; its
    default scenes are the quality bar's (EVAL_SEED), and the bar the page states is the one tests/demo holds."""
    import subprocess

    from qdebug.demo.evaluate import EVAL_SEED

    page = _page("demo.md")
    assert "one line each (`exact captions: 5/5 (100.0%)`)" in page
    run = subprocess.run(["qdebug", "demo", "eval", "--scenes", "2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"exact captions: \d/2 \(\d+\.\d%\)", lines[0]), lines
    assert re.fullmatch(r"attention peak in the shape's quadrant: \d/2 \(\d+\.\d%\)", lines[1]), lines
    assert _options("demo eval")["--seed"].default == EVAL_SEED
    assert "at least 95 % exact captions and 90 % peaks in the quadrant on 200 scenes" in page
    bar = (ROOT / "tests" / "demo" / "test_quality.py").read_text(encoding="utf-8")
    assert "n=200, seed=EVAL_SEED" in bar and "exact_rate >= 0.95" in bar and "peak_rate >= 0.90" in bar


def test_the_real_checkpoint_page_lists_the_supported_model_types_and_attns_defaults():
    """real-checkpoints.md: the supported list is the adapters' model types; `trust_remote_code` defaults off and no
    module of qdebug turns it on; `--layers` defaults to `all`, `--queries` to `gen`, and `--keep hidden` is a choice."""
    import inspect

    from qdebug.model.adapters import supported_model_types
    from qdebug.model.load import load_model

    page = " ".join((DOCS / "real-checkpoints.md").read_text(encoding="utf-8").split())
    said = re.search(r"The architecture is read from `config.json` \(supported: ([^)]*)\)", page)
    assert said, "real-checkpoints.md no longer lists the supported model types in the form this test reads"
    assert re.findall(r"`(\w+)`", said.group(1)) == supported_model_types()
    assert "`trust_remote_code` is never enabled" in page
    assert inspect.signature(load_model).parameters["trust_remote_code"].default is False
    passing = [str(p.relative_to(ROOT)) for p in (ROOT / "qdebug").rglob("*.py")
               if re.search(r"trust_remote_code\s*=\s*True", p.read_text(encoding="utf-8"))]
    assert not passing, passing
    assert "`--layers SPEC` (`all` [default], `none`, `0,5,-1`, `0-3`)" in page and _options("attn")["--layers"].default == "all"
    assert "`--queries gen` [default]" in page and _options("attn")["--queries"].default == "gen"
    assert "`--keep hidden` keeps every prompt row of every layer (`diff` always does)" in page
    assert "`hidden`" in _options("attn")["--keep"].help
    assert "RecordPolicy(keep_hidden=True)" in (ROOT / "qdebug" / "commands" / "diff_side.py").read_text(encoding="utf-8")
    assert "e.g. `repetition_penalty 1.3` for a checkpoint whose `generation_config.json` sets it" in page
    assert '"repetition_penalty 1.3"' in (ROOT / "tests" / "recording" / "test_generation_config.py").read_text(encoding="utf-8")


def test_the_front_page_names_the_families_and_the_stages_a_trace_holds(demo_trace):
    """docs/index.md: one family name per adapter; the stage table's rows are a demo trace's stages in order, and what
    each row says is captured is in that trace (prompt, ids, pixel shape, grid, spans; rows' stats, NaN/Inf and
    fingerprint; landed offsets and MRoPE ids; layer stats and attention; top-k and entropy; each step's token)."""
    from qdebug.model.adapters import ADAPTERS

    page = " ".join((DOCS / "index.md").read_text(encoding="utf-8").split())
    families = re.search(r"A debugger for Qwen multimodal inference \(([^)]*)\)", page).group(1).split(", ")
    assert families == ["Qwen2-VL", "Qwen2.5-VL", "Qwen3-VL", "Qwen3.5", "Qwen2-Audio", "Qwen2.5-Omni"]
    assert len(families) == len(ADAPTERS)
    assert "`preprocess → encode → sync → layer.N → logits → step.K`" in page
    rows = re.findall(r"\| `([\w.]+)` \| [^|]+ \|", page)
    assert rows == ["preprocess", "encode", "sync", "layer.N", "logits", "step.K"], rows
    trace, _scene = demo_trace
    names = list(trace.stages)
    shape = [n if not n.startswith(("layer.", "step.")) else n.split(".")[0] + (".N" if n.startswith("layer.") else ".K")
             for n in names]
    assert list(dict.fromkeys(shape)) == rows, names
    pre = trace.stages["preprocess"].summary
    assert pre.text and pre.num_tokens and pre.pixel_values_shape and pre.image_grid_thw and pre.spans
    image = trace.stages["encode"].summary.images[0]
    assert image.stats.norm_mean > 0 and image.stats.nan == image.stats.inf == 0 and image.fingerprint
    landed = trace.stages["sync"].summary.images[0]
    assert landed.text_offset == landed.visual_offset and "sync.position_ids" in trace.tensors
    assert trace.stages["layer.0"].summary.stats is not None and "layer.0.attn" in trace.tensors
    assert trace.stages["logits"].summary.last_topk and "logits.entropy" in trace.tensors
    assert trace.steps[0].token and trace.steps[0].topk.tokens and trace.steps[0].entropy >= 0


def test_the_demo_models_tokenizer_is_word_level_with_qwens_special_tokens():
    """demo-model.md: "a word-level tokenizer with Qwen's special tokens and a Qwen-style chat template"."""
    assert "a word-level tokenizer with Qwen's special tokens and a Qwen-style chat template" in _demo_page()
    tokenizer = json.loads((CHECKPOINT / "tokenizer.json").read_text(encoding="utf-8"))
    assert tokenizer["model"]["type"] == "WordLevel"
    added = {token["content"] for token in tokenizer["added_tokens"]}
    assert {"<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"} <= added
    template = (CHECKPOINT / "chat_template.jinja").read_text(encoding="utf-8")
    assert "<|im_start|>" in template and "<|vision_start|><|image_pad|><|vision_end|>" in template


def test_per_layer_and_per_step_copies_stay_on_their_device_until_flush():
    """real-checkpoints.md: a recorder holds its per-layer/per-step copies on the model's device (here `meta`, a device
    that is not the CPU) and moves nothing until generation ends; on the CPU it copies at once; the per-layer and
    per-step fields all go through `_hold`, and `flush` brings each of them to the CPU."""
    import inspect

    import torch

    from qdebug.trace.hooks import Recorder

    page = " ".join((DOCS / "real-checkpoints.md").read_text(encoding="utf-8").split())
    assert ("What a trace keeps per layer and per step (hidden rows and their statistics, attention rows, step logits) "
            "is copied on the device and leaves it once, when generation ends") in page
    recorder = Recorder()
    held = recorder._hold(torch.ones(3, 4, device="meta"))
    assert held.device.type == "meta" and recorder._pending  # no device→host copy (no host sync) while generate runs
    source = torch.ones(2)
    copy = Recorder()._hold(source)
    assert copy.device.type == "cpu" and copy.data_ptr() != source.data_ptr()  # a copy, not a view, at once on CPU
    code = inspect.getsource(Recorder)
    for field in ("self.hidden[layer]", "self.hidden_kept[layer]", "self.step_hidden.setdefault(layer, []).append",
                  "self.step_logits.append", "self.attn.setdefault(call.layer, []).append"):
        assert re.search(re.escape(field) + r"(?: = |\()self\._hold\(", code), field
    flush = inspect.getsource(Recorder.flush)
    for field in ("hidden", "hidden_kept", "step_hidden", "attn", "step_logits"):
        assert f"self.{field} = " in flush, field
    assert "stats_from(*v)" in flush  # the statistics pair kept on the device becomes numbers only here
