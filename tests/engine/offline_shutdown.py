"""Run by test_offline_shutdown.py with the vLLM environment's python: vLLM's offline engine in this process, qdebug's
plugin tracing two requests, the last one the engine serves before the process exits. Prints the two answers."""

import json
import os
import sys

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the worker in this process: its exit is this process's exit

from PIL import Image  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402

checkpoint, image = sys.argv[1:3]
llm = LLM(model=checkpoint, enforce_eager=True, max_model_len=1024, dtype="float32")
chat = [{"role": "user", "content": [{"type": "image_pil", "image_pil": Image.open(image).convert("RGB")},
                                     {"type": "text", "text": "Describe the image."}]}]
traced = lambda name, tokens: SamplingParams(temperature=0, max_tokens=tokens, extra_args={"qdebug_trace": True, "qdebug_id": name})
first = llm.chat([chat], traced("first", 16))[0].outputs[0]
last = llm.chat([chat], traced("last", 4))[0].outputs[0]  # no step runs after it: the worker is never told it finished
print(json.dumps({"first": list(first.token_ids), "last": list(last.token_ids)}))
