"""Regenerate the TUI fixtures: a demo trace (red_circle.qdt) and a small hand-made replay report (burst.qdr).

Run from the repository root: `python tests/data/make_fixtures.py [--model demo] [--out tests/data]`.
The report is built by hand from three traced scene requests (a, b, c): c's encoder rows are overwritten by
b's (a buffer overwrite with donor b), so c's replayed caption describes b's image.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROMPT = "Describe the image."
RED_CIRCLE = "sample_data/red_circle_top_left.png"
# b and c share a size (140×84, 15 visual tokens) so b's rows fit c's placeholder span exactly.
BURST = {"a": "sample_data/yellow_circle_bottom_left.png", "b": "sample_data/blue_circle_top_right.png", "c": "tests/data/burst_c.png"}


def _scene_c(path: Path) -> None:
    """The third burst image: a green square in the bottom left, 140×84 (fixed seed)."""
    from qdebug.demo.scenes import make_scene

    make_scene(random.Random(7), width=140, height=84, colour="green", shape="square", quadrant="bottom left").image.save(path)


def _trace(loaded, image_path: str, request_id: str = "0", overwrite_rows=None, max_new_tokens: int = 12):
    """Trace one request; with `overwrite_rows`, the vision tower's output is replaced by those rows first."""
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import trace_request

    request = build_request(PROMPT, [image_path], max_new_tokens=max_new_tokens, request_id=request_id)
    if overwrite_rows is None:
        return trace_request(loaded, request)

    def overwrite(module, args, output):  # registered before qdebug's hooks, so the trace sees the overwritten rows
        rows = getattr(output, "pooler_output", output)
        rows.copy_(overwrite_rows.to(rows.dtype))

    handle = loaded.adapter.vision_tower(loaded.model).register_forward_hook(overwrite)
    try:
        return trace_request(loaded, request)
    finally:
        handle.remove()


def _cosine(stream_rows, encode_rows) -> float:
    """Mean row-wise cosine when the row counts agree, else cosine of the mean rows."""
    import torch.nn.functional as F

    a, b = stream_rows.float(), encode_rows.float()
    if a.shape == b.shape:
        return float(F.cosine_similarity(a, b, dim=-1).mean())
    return float(F.cosine_similarity(a.mean(0), b.mean(0), dim=0))


def make_burst(loaded):
    """A ReplayReport of three requests, c contaminated by b's encoder rows."""
    from qdebug.findings import Finding
    from qdebug.replay.batch import Event
    from qdebug.replay.report import ReplayReport, RequestOutcome

    references = {rid: _trace(loaded, path, rid) for rid, path in BURST.items()}
    replayed = dict(references)
    replayed["c"] = _trace(loaded, BURST["c"], "c", overwrite_rows=references["b"].tensors["encode.0"])
    ids = list(BURST)
    matrix = []
    for row in ids:  # whose token stream (replayed), against whose isolated encode rows
        t = replayed[row]
        start, end = t.images[0].span
        stream = t.tensors["sync.embeds"][start:end]
        matrix.append([round(_cosine(stream, references[col].tensors["encode.0"]), 4) for col in ids])
    outcomes = []
    for rid in ids:
        sync = replayed[rid].stages["sync"].summary.images[0]
        bad = rid == "c"
        outcomes.append(
            RequestOutcome(
                id=rid, image=BURST[rid], reference=references[rid].generated_text, replayed=replayed[rid].generated_text,
                verdict="contaminated" if bad else "ok", donor="b" if bad else None,
                text_offset=sync.text_offset, visual_offset=sync.visual_offset,
            )
        )
    n = {rid: references[rid].images[0].tokens for rid in ids}
    events = [
        Event("encode_start", "a", t=0.000, seq=0, tokens=n["a"]),
        Event("encode_start", "b", t=0.004, seq=1, tokens=n["b"]),
        Event("buffer_write", "a", t=0.010, seq=2, offset=0, tokens=n["a"]),
        Event("encode_start", "c", t=0.012, seq=3, tokens=n["c"]),
        Event("buffer_write", "b", t=0.016, seq=4, offset=n["a"], tokens=n["b"]),
        Event("buffer_write", "c", t=0.021, seq=5, offset=n["a"], tokens=n["c"], message="c wrote at b's offset"),
        Event("stitch", "a", t=0.024, seq=6, offset=0, tokens=n["a"]),
        Event("buffer_overwrite", "c", t=0.027, seq=7, offset=n["a"], tokens=n["b"], donor="b", message="b's rows landed over c's slot"),
        Event("stitch", "b", t=0.029, seq=8, offset=n["a"], tokens=n["b"]),
        Event("stitch", "c", t=0.031, seq=9, offset=n["a"], tokens=n["c"]),
        Event("first_token", "a", t=0.052, seq=10),
        Event("first_token", "b", t=0.055, seq=11),
        Event("first_token", "c", t=0.058, seq=12),
    ]
    finding = Finding(kind="contamination", severity="error", request_id="c", donor="b",
                      message=f"c's visual tokens came from b (cosine {matrix[2][1]:.3f} vs own {matrix[2][2]:.3f})")
    return ReplayReport(
        source="tests/data/make_fixtures.py (hand-made burst)", kind="capture", mode="threads", inject="buffer-overwrite",
        seed=7, requests=outcomes, contamination_ids=ids, contamination=matrix, events=events, findings=[finding],
        traces=replayed, references=references,
    )


def main(argv: list[str] | None = None) -> None:
    """Write red_circle.qdt, burst_c.png and burst.qdr into --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo", help="model spec (default: the shipped demo checkpoint)")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)

    import os

    os.chdir(ROOT)  # image paths inside the traces are relative to the repository root
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model
    from qdebug.replay.report import save_report
    from qdebug.trace.schema import save_trace

    quiet_transformers()
    loaded = load_model(args.model, "cpu", "float32")
    _scene_c(ROOT / BURST["c"])
    trace = _trace(loaded, RED_CIRCLE, max_new_tokens=16)
    written = save_trace(trace, args.out / "red_circle.qdt")
    print("wrote", written, repr(trace.generated_text))
    report = make_burst(loaded)
    written_report = save_report(report, args.out / "burst.qdr")
    print("wrote", written_report, [(r.id, r.replayed) for r in report.requests])
    for path in (written, written_report):
        path.chmod(0o644)  # the writers use private temp files; fixtures are for everyone to read


if __name__ == "__main__":
    main()
