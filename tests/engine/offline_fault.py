"""Run by test_recording_errors.py with the vLLM environment's python: vLLM's offline engine in this process, qdebug's
plugin on, and a fault planted in qdebug's own recording. Prints one JSON line: the answers and what the folder holds."""

import json
import os
import sys

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the worker in this process, so the planted fault reaches it

from PIL import Image  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402

from qdebug.engine.requests import EngineRequest  # noqa: E402


def broken(self):
    raise RuntimeError("planted fault in qdebug's recording")


checkpoint, image, traces = sys.argv[1:4]
llm = LLM(model=checkpoint, enforce_eager=True, max_model_len=1024, dtype="float32")
chat = [{"role": "user", "content": [{"type": "image_pil", "image_pil": Image.open(image).convert("RGB")},
                                     {"type": "text", "text": "Describe the image."}]}]
greedy = lambda **extra: SamplingParams(temperature=0, max_tokens=16, extra_args=extra or None)
plain = llm.chat([chat], greedy())[0].outputs[0].text
EngineRequest.finish_prefill = broken
faulty = llm.chat([chat], greedy(qdebug_trace=True, qdebug_id="faulty"))[0].outputs[0].text
# the worker learns a request finished in the next step: one more request runs it (else "no trace" proves nothing)
llm.chat([chat], greedy())
print(json.dumps({"plain": plain, "faulty": faulty, "files": sorted(os.listdir(traces)) if os.path.isdir(traces) else []}))
