"""Item 17: video frames get the image pixel limit, and the frames a video keeps a limit on their pixels together, both
checked before the frames are decoded (a 300 KB AVI of six 10000×10000 frames took 117 s and 7.3 GB to trace)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from .conftest import one_line_error

# Peak memory of the refusing `qdebug` process: torch and transformers imported, nothing decoded (~0.2-0.5 GB measured).
# One 10000×10000 frame held as RGB is 0.3 GB; the six of the AVI were 7.3 GB at the peak.
PEAK_LIMIT_KB = 1_200_000
SECONDS = 30  # refused in 1.5-2.5 s on 2 busy cores; decoding the AVI alone took over a minute


def h264(path, width: int, height: int, frames: int):
    """A black video in H.264 (ultrafast: ~0.6 s a 100 M-pixel frame to write, tiny on disk), written with PyAV."""
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("h264", rate=2, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        frame = av.VideoFrame(width, height, "yuv420p")
        for plane in frame.planes:
            plane.update(bytes(plane.buffer_size))
        for _ in range(frames):
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def measured(*args) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run the installed `qdebug` from a fresh Python whose only child it is: (the run, seconds, its peak RSS in KB)."""
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    script = ("import json, resource, subprocess, sys, time\n"
              "t = time.monotonic()\n"
              "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "print(json.dumps({'rc': p.returncode, 'stdout': p.stdout, 'stderr': p.stderr, 'seconds': time.monotonic() - t,\n"
              "                  'peak_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")
    out = json.loads(subprocess.run([sys.executable, "-c", script, exe, *map(str, args)], capture_output=True, text=True,
                                    timeout=600, check=True).stdout)
    return subprocess.CompletedProcess(args, out["rc"], out["stdout"], out["stderr"]), out["seconds"], out["peak_kb"]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """The AVI of the report (six 10000×10000 frames), and an MKV of thirty 5000×5000 frames: each under the image
    limit, 750 M pixels together."""
    root = tmp_path_factory.mktemp("big_videos")
    big = h264(root / "big.avi", 10000, 10000, 6)
    many = h264(root / "many.mkv", 5000, 5000, 30)
    assert big.stat().st_size < 2_000_000 and many.stat().st_size < 2_000_000
    return {"big": big, "many": many}


def test_a_frame_over_the_image_limit_is_refused_before_decoding(videos):
    proc, seconds, peak_kb = measured("attn", videos["big"], "Describe.", "--device", "cpu")
    line = one_line_error(proc, "video frame too large", "big.avi", "10000×10000 = 100,000,000 pixels", "89,478,485 per frame")
    assert proc.returncode == 2, line
    assert seconds < SECONDS and peak_kb < PEAK_LIMIT_KB, (seconds, peak_kb)


def test_kept_frames_over_the_video_limit_are_refused_before_decoding(videos):
    proc, seconds, peak_kb = measured("attn", videos["many"], "Describe.", "--device", "cpu")
    line = one_line_error(proc, "video too large", "many.mkv", "30 frame(s) of 5000×5000", "750,000,000 pixels", "--max-frames")
    assert proc.returncode == 2, line
    assert seconds < SECONDS and peak_kb < PEAK_LIMIT_KB, (seconds, peak_kb)


def test_the_video_limit_counts_the_frames_kept_not_the_file(videos):
    from qdebug.trace.video_input import load_video

    # --fps 0.2 on a 2 fps file keeps 3 of the 30 frames (75 M pixels): under the limit, decoded, 3 frames held.
    video = load_video(videos["many"], fps=0.2)
    assert video.total_frames == 30 and video.indices == [0, 10, 20] and video.size == (5000, 5000)


def test_a_frame_folder_over_the_video_limit_is_refused_before_decoding(tmp_path):
    from PIL import Image

    folder = tmp_path / "frames"
    folder.mkdir()
    Image.new("1", (9000, 9000)).save(folder / "f00.png", optimize=True)  # 81 M pixels, ~10 KB on disk
    for i in range(1, 9):
        shutil.copy(folder / "f00.png", folder / f"f{i:02d}.png")
    proc, seconds, peak_kb = measured("attn", folder, "Describe.", "--device", "cpu")
    line = one_line_error(proc, "video too large", "9 frame(s) of 9000×9000", "729,000,000 pixels")
    assert proc.returncode == 2, line
    assert seconds < SECONDS and peak_kb < PEAK_LIMIT_KB, (seconds, peak_kb)  # decoded, the nine are 2.2 GB as RGB
