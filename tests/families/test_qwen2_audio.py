"""Qwen2-Audio end to end on a tiny random checkpoint: clips in, audio stages, attention over time, the 004 diff."""

import base64
import json

import pytest
import torch
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.model.load import load_model
from qdebug.trace.audio import load_audio
from qdebug.trace.request import build_media_request
from qdebug.trace.runner import prepare, trace_request

from .build import tone

runner = CliRunner()


def test_trace_matches_plain_generate_and_stages_check_the_clip(qwen2_audio, qwen2_audio_dir, clip_wav):
    plain = load_model(str(qwen2_audio_dir), "cpu", "float32", attn_implementation="eager")
    req = build_media_request("What is it?", clips=[load_audio(clip_wav)], max_new_tokens=5)
    trace = trace_request(qwen2_audio, req)
    inputs = prepare(plain, req).inputs
    with torch.inference_mode():
        out = plain.model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert trace.generated_ids == out[0, inputs["input_ids"].shape[1]:].tolist()
    assert all(s.ok for s in trace.stages.values())
    (clip,) = trace.meta.audio
    # 1 s at 16 kHz with a 160-sample hop: 100 frames kept by the mask; the model's conv + pool keep 25 rows.
    assert (clip["source_rate"], clip["rate"], clip["frames"], clip["rows"]) == (22050, 16000, 100, 25)
    start, end = clip["span"]
    ids = inputs["input_ids"][0].tolist()
    audio_id = plain.config.audio_token_id
    assert end - start == ids.count(audio_id) == 25 and ids[start:end] == [audio_id] * 25
    assert trace.tensors["encode.0"].shape == (25, 64)
    sync = trace.stages["sync"].summary.audio[0]
    assert sync.audio_offset == sync.text_offset == start and sync.max_abs_diff == 0.0
    assert abs(clip["seconds_per_row"] - 0.04) < 1e-9


def test_resampling_to_the_feature_extractor_rate(tmp_path):
    wav = load_audio(tone(tmp_path / "a.wav", seconds=0.5, rate=44100))
    flac = load_audio(tone(tmp_path / "a.flac", seconds=0.5, rate=8000, fmt="FLAC"))
    assert (wav.rate, flac.rate) == (44100, 8000)
    a, b = wav.at_rate(16000), flac.at_rate(16000)
    assert len(a) == len(b) == 8000
    # Same 440 Hz tone either way: the spectra peak in the same bin.
    assert int(torch.fft.rfft(torch.tensor(a[:4000])).abs().argmax()) == int(torch.fft.rfft(torch.tensor(b[:4000])).abs().argmax()) == 110


def test_attn_cli_on_a_clip_reports_the_peak_time(qwen2_audio_dir, clip_wav, tmp_path):
    png, out = tmp_path / "a.png", tmp_path / "a.json"
    res = runner.invoke(app, ["attn", str(clip_wav), "What is it?", "--model", str(qwen2_audio_dir), "--device", "cpu",
                              "--max-new-tokens", "3", "--png", str(png), "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["audio"][0]["rows"] == 25 and doc["images"] == []
    for step in doc["steps"]:
        peak = step["audio_peak"]
        assert 0 <= peak["row"] < 25 and peak["seconds"] == pytest.approx(peak["row"] * 0.04, abs=1e-3)
    assert "peak at" in res.output and "attention" in res.output and "waveform" in res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_audio_option_takes_flac_and_the_prompt_places_it(qwen2_audio_dir, clip_wav, tmp_path):
    flac = tone(tmp_path / "b.flac", seconds=0.6, rate=16000, fmt="FLAC")
    out = tmp_path / "b.json"
    # The positional clip and a second one from --audio; markers place both.
    res = runner.invoke(app, ["attn", str(clip_wav), "First <audio> then <audio> which?", "--audio", str(flac),
                              "--model", str(qwen2_audio_dir), "--device", "cpu", "--max-new-tokens", "2", "--json", str(out)])
    assert res.exit_code == 0, res.output
    clips = json.loads(out.read_text())["audio"]
    assert [c["frames"] for c in clips] == [100, 60] and [c["rows"] for c in clips] == [25, 15]
    assert clips[0]["span"][1] < clips[1]["span"][0]


def test_bad_clips_and_wrong_models_are_one_line_errors(qwen2_audio_dir, clip_wav, tmp_path):
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt garbage")
    res = runner.invoke(app, ["attn", str(broken), "hi", "--model", str(qwen2_audio_dir)])
    assert res.exit_code == 2 and "corrupt audio" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["attn", str(clip_wav), "hi", "--model", "demo", "--device", "cpu"])
    assert res.exit_code == 2 and "takes image input but audio clip(s) were given" in res.output
    res = runner.invoke(app, ["attn", str(clip_wav), "<audio> and <audio>", "--model", str(qwen2_audio_dir)])
    assert res.exit_code == 2 and "2 <audio> placeholder(s) but 1 clip(s)" in res.output


def test_diff_paths_both_orders_agree_in_float32(qwen2_audio_dir, clip_wav, tmp_path):
    out = tmp_path / "d.json"
    res = runner.invoke(app, ["diff", str(clip_wav), "What is it?", "--vary", "paths", "--order", "both", "--model", str(qwen2_audio_dir),
                              "--device", "cpu", "--dtype", "float32", "--max-new-tokens", "3", "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert [c["order"] for c in doc["comparisons"]] == ["audio-first", "text-first"]
    for comparison in doc["comparisons"]:
        assert comparison["first_divergence"] is None
        assert {s["name"] for s in comparison["stages"]} >= {"encode", "sync", "layer.0", "layer.1", "logits"}


def test_head_first_is_localised_to_its_layer(qwen2_audio_dir, clip_wav):
    from qdebug.commands.diff import DiffArgs, run_diff

    ((_, result, _, _),) = run_diff(DiffArgs(str(clip_wav), "What is it?", vary="none", inject="head-first:1",
                                             model=str(qwen2_audio_dir), device="cpu", max_new_tokens=3)).comparisons
    assert result.first_divergence.name == "layer.1"
    layout = [f for f in result.findings if f.kind == "layout"]
    assert layout and {f.layer for f in layout} == {1} and "swapped" in layout[0].message


def test_capture_input_audio_parts(tmp_path, clip_wav, qwen2_audio):
    from qdebug.replay.formats.capture import parse_capture

    data = base64.b64encode(clip_wav.read_bytes()).decode()
    lines = [
        {"id": "ok", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
                                                              {"type": "text", "text": "What is it?"}]}]},
        {"id": "bad", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]},
    ]
    path = tmp_path / "cap.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    ok, bad = parse_capture(path).requests
    assert ok.error is None and ok.request.parts[0] == ("audio", 0) and ok.request.audios[0].rate == 22050
    assert "not an audio clip" in bad.error
    trace = trace_request(qwen2_audio, ok.request)
    assert trace.meta.audio[0]["rows"] == 25 and trace.stages["sync"].ok


def test_saved_audio_trace_round_trips(qwen2_audio, clip_wav, tmp_path):
    from qdebug.trace.schema import load_trace, save_trace

    trace = trace_request(qwen2_audio, build_media_request("What is it?", clips=[load_audio(clip_wav)], max_new_tokens=2))
    back = load_trace(save_trace(trace, tmp_path / "t.qdt"))
    assert back.meta.audio == trace.meta.audio and back.generated_ids == trace.generated_ids
    assert torch.equal(back.tensors["audio.0.envelope"], trace.tensors["audio.0.envelope"])
    from qdebug.analysis.item_attention import drawn_as

    assert drawn_as(back) == "audio"  # the PNG drawer and the TUI's form are the audio ones


def test_tui_request_screen_draws_attention_over_time(qwen2_audio, clip_wav):
    import asyncio

    from qdebug.tui.app import build_app
    from qdebug.tui.widgets.attention_view import AttentionView
    from qdebug.tui.widgets.stage_detail import StageDetail
    from tests.tui.conftest import SIZE, text_of, wait_for

    trace = trace_request(qwen2_audio, build_media_request("What is it?", clips=[load_audio(clip_wav)], max_new_tokens=2))

    async def run():
        app = build_app(trace=trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert "one placeholder span per clip" in text_of(app.screen.query_one(StageDetail))
            await pilot.press("down", "down", "down")
            await wait_for(pilot, lambda: "attention over time" in text_of(app.screen.query_one(AttentionView)))
            drawn = text_of(app.screen.query_one(AttentionView))
            assert "clip 0 (25 rows, 1.00 s)" in drawn and "peak at" in drawn and "waveform" in drawn

    asyncio.run(run())


def test_missing_audio_option_and_mixed_media_are_one_line_errors(qwen2_audio_dir, clip_wav, tmp_path):
    res = runner.invoke(app, ["attn", str(clip_wav), "hi", "--audio", str(tmp_path / "nope.wav"), "--model", str(qwen2_audio_dir)])
    assert res.exit_code == 2 and "audio not found" in res.output and "nope.wav" in res.output
    res = runner.invoke(app, ["attn", "sample_data/red_circle_top_left.png", "hi", "--audio", str(clip_wav), "--model", str(qwen2_audio_dir)])
    assert res.exit_code == 2 and "expected one kind per request" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_replay_runs_a_capture_of_audio_requests(qwen2_audio_dir, clip_wav, tmp_path):
    data = base64.b64encode(clip_wav.read_bytes()).decode()
    message = {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
                                           {"type": "text", "text": "What is it?"}]}
    path = tmp_path / "burst.jsonl"
    path.write_text("".join(json.dumps({"id": rid, "messages": [message], "max_tokens": 2}) + "\n" for rid in ("a", "b")))
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["replay", str(path), "--model", str(qwen2_audio_dir), "--device", "cpu", "--json", str(out)])
    assert res.exit_code == 0, res.output
    requests = json.loads(out.read_text())["requests"]
    assert [r["id"] for r in requests] == ["a", "b"]
    # Each replayed run of the clip answers what its isolated reference answered, and its rows landed on its span: the
    # span starts after the tokens the processor's own chat template puts before the first <|AUDIO|> (system turn,
    # "user\nAudio 1: <|audio_bos|>": 15 with this tokenizer).
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(qwen2_audio_dir)
    chat = [{"role": "user", "content": [{"type": "audio", "audio_url": str(clip_wav)}, {"type": "text", "text": "What is it?"}]}]
    prompt = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    span_start = len(processor.tokenizer(prompt.split(processor.audio_token)[0]).input_ids)
    assert span_start > 0 and all(r["verdict"] == "ok" and r["replayed"] == r["reference"] for r in requests), requests
    assert [r["visual_offset"] for r in requests] == [span_start] * 2


def test_audio_first_order_on_an_image_is_refused():
    res = runner.invoke(app, ["diff", "sample_data/red_circle_top_left.png", "hi", "--vary", "paths", "--order", "audio-first"])
    assert res.exit_code == 2 and "--order audio-first" in res.output and "not an audio clip" in res.output
