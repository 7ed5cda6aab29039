"""Regenerate sample_data/capture.jsonl: a 14-request burst whose `observed` outputs come from a faulty replay.

Images are scenes of several sizes (some pairs share a size, so a wholesale buffer overwrite keeps the row
count); most are files under capture/ referenced by relative path, two are embedded as data: URLs. The
`observed` field is what the same burst answered when replayed with `--inject shared-visual-buffer --seed 0`,
as a production service with that bug would have answered.
"""

import base64
import io
import json
import random
from pathlib import Path

from qdebug.demo.scenes import make_scene

HERE = Path(__file__).parent
SIZES = [(168, 112), (168, 112), (84, 84), (224, 224), (140, 196), (140, 196), (112, 112), (196, 140),
         (84, 168), (224, 112), (112, 112), (168, 112), (84, 84), (140, 140)]
PROMPTS = ["Describe the image.", "What is in the picture?", "Caption this image.", "What do you see?"]


def _data_url(image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def write_capture(observed: dict[str, str] | None = None) -> Path:
    """Write the capture (with `observed` where given) and its images; returns the capture path."""
    rng = random.Random(2024)
    lines = []
    for i, (w, h) in enumerate(SIZES):
        rid = f"req-{i + 1:02d}"
        scene = make_scene(rng, width=w, height=h)
        if i in (3, 9):
            url = _data_url(scene.image)
        else:
            name = f"capture/{rid}.png"
            scene.image.save(HERE / name)
            url = name
        body = {
            "id": rid,
            "model": "Qwen/Qwen2-VL-2B-Instruct",
            "arrival_ts": round(1720794187.100 + 0.004 * i, 3),
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": PROMPTS[i % len(PROMPTS)]},
            ]}],
            "max_tokens": 16,
        }
        if observed and rid in observed:
            body["observed"] = observed[rid]
        lines.append(json.dumps(body))
    path = HERE / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    """Write the capture, replay it with the shared-buffer fault, and record those answers as `observed`."""
    from qdebug.commands.replay import ReplayArgs, run_replay

    path = write_capture()
    report = run_replay(ReplayArgs(path, inject="shared-visual-buffer", seed=0, device="cpu"))
    observed = {r.id: r.replayed for r in report.requests if r.replayed is not None and r.id not in ("req-07", "req-13")}
    write_capture(observed)
    for r in report.requests:
        print(f"{r.id}: {r.verdict:13} donor={r.donor} observed={r.replayed!r} reference={r.reference!r}")


if __name__ == "__main__":
    main()
