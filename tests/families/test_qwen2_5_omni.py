"""Qwen2.5-Omni's thinker: an image, a clip and a video in one request, each encoder's rows at its own placeholders,
and the time-aligned positions Omni builds for a video with its sound, checked against the model's own function.

The tiny checkpoint is random: the tests assert structure and positions, not what the model says."""

import json

import pytest
import torch

from qdebug.trace.audio import load_audio
from qdebug.trace.request import build_media_request
from qdebug.trace.request import load_image
from qdebug.trace.runner import prepare, trace_request
from qdebug.trace.video_audio import audio_track
from qdebug.trace.video_input import load_video
from tests.cli.installed import qdebug
from tests.conftest import scene

from .build import tone, video_with_sound

OMNI = "qwen2_5_omni"


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    """A scene PNG, a 1 s tone and a 6 s video with sound, on disk."""
    root = tmp_path_factory.mktemp("omni_media")
    png = root / "scene.png"
    scene(5, width=112, height=112).image.save(png)
    return {"image": png, "audio": tone(root / "tone.wav"), "video": video_with_sound(root / "clip.mp4")}


def _request(media, use_audio_in_video=False, prompt="What do you see and hear?"):
    video = load_video(media["video"], fps=1.0)
    if use_audio_in_video:
        video.audio = audio_track(media["video"])
    return build_media_request(prompt, images=[load_image(media["image"])], image_paths=[str(media["image"])],
                               clips=[load_audio(media["audio"])], videos=[video], video_paths=[str(media["video"])],
                               use_audio_in_video=use_audio_in_video, max_new_tokens=3)


def _placeholders(loaded, inputs, attr):
    token = getattr(loaded.config, attr)
    return [i for i, t in enumerate(inputs["input_ids"][0].tolist()) if t == token]


@pytest.mark.parametrize("use_audio_in_video", [False, True])
def test_each_encoder_rows_land_at_its_own_spans(family_model, media, use_audio_in_video):
    loaded = family_model(OMNI)
    request = _request(media, use_audio_in_video)
    trace = trace_request(loaded, request)
    inputs = prepare(loaded, request).inputs
    spans = trace.stages["sync"].summary.media
    assert [(m.modality, m.index) for m in spans] == ([("image", 0), ("audio", 0), ("audio", 1), ("video", 0)] if use_audio_in_video
                                                      else [("image", 0), ("audio", 0), ("video", 0)])
    embeds = trace.tensors["sync.embeds"]
    for modality, attr in (("image", "image_token_index"), ("audio", "audio_token_index"), ("video", "video_token_index")):
        mine = [m for m in spans if m.modality == modality]
        positions = [p for m in mine for s, e in m.runs for p in range(s, e)]
        assert positions == _placeholders(loaded, inputs, attr)  # the spans are exactly the processor's placeholders
        rows = torch.cat([trace.tensors[f"encode.{m.item}"] for m in mine])
        assert torch.equal(embeds[positions], rows)  # each encoder's rows, in item order, at that modality's placeholders
        assert all(m.rows == m.placeholders == m.expected and m.exact for m in mine)
    checks = {c.name: c.ok for c in trace.stages["sync"].checks}
    assert checks["MRoPE position ids == get_rope_index"] and all(s.ok for s in trace.stages.values())



def test_replay_offsets_measure_every_item_of_an_omni_request(family_model, media):
    """Replay's offset measurement reads every item (image, clip and video), each found at its own placeholders in
    its own rows, and a stream whose video rows are another request's names that request as the donor."""
    from qdebug.analysis.offsets import candidates_from_references, measure_stream, media_spans

    loaded = family_model(OMNI)
    trace = trace_request(loaded, _request(media))
    spans = media_spans(trace)
    assert [m.item for m in trace.stages["sync"].summary.media] == [i for i, _ in spans] == [0, 1, 2]
    candidates = candidates_from_references({"own": trace})
    seq = trace.tensors["sync.embeds"]
    measured = measure_stream(seq, spans, "own", candidates)
    assert [(m["visual_offset"], m["text_offset"], m.get("donor")) for m in measured] == [(s, s, None) for _, (s, _e) in spans]
    video_item, (start, end) = spans[2]
    other = seq.clone()
    other[start:end] = other[start:end].flip(-1)  # rows no encoder of this request produced
    donor = candidates[2].rows.flip(-1)
    measured = measure_stream(other, spans, "own", candidates + [type(candidates[2])("donor", video_item, donor)])
    assert measured[2].get("donor") == "donor", measured[2]

def test_a_video_with_its_sound_interleaves_in_time_chunks_and_positions_follow_the_models_function(family_model, media):
    loaded = family_model(OMNI)
    request = _request(media, use_audio_in_video=True)
    trace = trace_request(loaded, request)
    spans = {(m.modality, m.index): m for m in trace.stages["sync"].summary.media}
    video, track = spans[("video", 0)], spans[("audio", 1)]
    # In 2 s chunks, each chunk's frames then its sound: the first 2 s of the video's rows, then its sound (the tiny
    # feature extractor keeps a 2 s window), then the rest of its rows.
    assert len(video.runs) == 2 and len(track.runs) == 1
    assert video.runs[0][1] == track.runs[0][0] and track.runs[0][1] == video.runs[1][0]
    received = trace.tensors["sync.position_ids"]
    inputs = prepare(loaded, request).inputs
    own, _ = loaded.adapter.media_rope_index(loaded.model, inputs, use_audio_in_video=True)
    assert torch.equal(received, own[:, 0])
    flat, _ = loaded.adapter.media_rope_index(loaded.model, inputs, use_audio_in_video=False)
    assert not torch.equal(received, flat[:, 0])  # the check would see positions built without the interleaving


@pytest.mark.parametrize("use_audio_in_video", [False, True])
def test_traced_tokens_equal_untraced_generate(family_dir, family_model, media, use_audio_in_video):
    from qdebug.model.load import load_model

    plain = load_model(str(family_dir(OMNI)), "cpu", "float32", attn_implementation="eager")
    request = _request(media, use_audio_in_video)
    trace = trace_request(family_model(OMNI), request)
    inputs = prepare(plain, request).inputs
    with torch.inference_mode():
        out = plain.model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert trace.generated_ids == out[0, inputs["input_ids"].shape[1]:].tolist()


def test_installed_attn_reports_every_item_and_round_trips(family_dir, media, tmp_path):
    out, saved = tmp_path / "omni.json", tmp_path / "omni.qdt"
    code, stdout, stderr = qdebug(tmp_path, "attn", media["image"], "Describe <image>, <audio> and <video>.", "--audio", media["audio"],
                                  "--video", media["video"], "--fps", "1", "--use-audio-in-video", "--model", family_dir(OMNI),
                                  "--max-new-tokens", "2", "--json", out, "--save", saved)
    assert code == 0, stderr
    for word in ("image 0: grid", "audio 0:", "audio 1:", "video 0: grid", "use_audio_in_video", "rows 16/16 exact"):
        assert word in stdout, word
    doc = json.loads(out.read_text())
    media_json = doc["media"]
    assert [(m["modality"], m["index"], m["exact"]) for m in media_json] == [("image", 0, True), ("audio", 0, True), ("audio", 1, True), ("video", 0, True)]
    from qdebug.trace.schema import load_trace

    back = load_trace(saved)
    assert back.mixed_media and [m.modality for m in back.stages["sync"].summary.media] == ["image", "audio", "audio", "video"]
    # diff's images table: where each run's sync put the image's rows (its placeholders: the rows are exact there)
    from qdebug.analysis.diff import image_report

    [image] = image_report(back, back)
    assert image["a_visual_offset"] == image["b_visual_offset"] == image["text_offset"] is not None


def test_bad_requests_are_one_line_errors(family_dir, media, tmp_path):
    silent = tmp_path / "frames"
    silent.mkdir()
    scene(1, width=112, height=112).image.save(silent / "0.png")
    scene(2, width=112, height=112).image.save(silent / "1.png")
    cases = [
        (["attn", str(silent), "hi", "--use-audio-in-video", "--model", str(family_dir(OMNI))], "no audio track"),
        (["attn", str(media["video"]), "hi", "--use-audio-in-video", "--model", "demo"], "does not take a video's sound"),
        (["attn", str(media["image"]), "<image> <image>", "--model", str(family_dir(OMNI))], "placeholder"),
    ]
    for argv, words in cases:
        code, _, stderr = qdebug(tmp_path, *argv)
        lines = stderr.strip().splitlines()
        assert code != 0 and len(lines) == 1 and words in lines[0] and "Traceback" not in stderr, (argv, stderr)


def test_onnx_export_and_diff_on_an_image_request(family_dir, media, tmp_path):
    """The decoder graphs export and agree with PyTorch; the vision graph (windowed attention, as Qwen2.5-VL's) is
    named as not exported, never silently missing."""
    out = tmp_path / "onnx"
    code, stdout, stderr = qdebug(tmp_path, "export", "onnx", "--model", family_dir(OMNI), "--out", out)
    assert code == 0, stderr
    assert "not exported: the vision graph" in " ".join((stdout + stderr).split())
    code, stdout, stderr = qdebug(tmp_path, "diff", media["image"], "Describe.", "--onnx", out, "--model", family_dir(OMNI), "--max-new-tokens", "2")
    assert code == 0, stderr + stdout
    assert "all checks passed" in stdout


def test_a_full_omni_checkpoint_is_traced_through_its_thinker(family_dir, family_model, media, tmp_path):
    """`qwen2_5_omni` (thinker, talker, token2wav) loads without its speech output; its thinker traces as the
    thinker-only checkpoint with the same weights does."""
    from qdebug.model.load import load_model

    from .build import build_qwen2_5_omni_full

    full = load_model(str(build_qwen2_5_omni_full(tmp_path / "full", family_dir(OMNI))), "cpu", "float32")
    assert type(full.model).__name__ == "Qwen2_5OmniThinkerForConditionalGeneration"
    request = _request(media)
    got, want = trace_request(full, request), trace_request(family_model(OMNI), request)
    assert got.generated_ids == want.generated_ids
    assert torch.equal(got.tensors["sync.embeds"], want.tensors["sync.embeds"])
