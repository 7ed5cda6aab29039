"""Run by test_watch_hostile.py with the vLLM environment's python (prometheus_client is vLLM's): a registry holding a
series of the server's own and the watch's collector over FOLDER (run RUN), scraped as vLLM's /metrics is. Prints one
JSON line: whether the scrape raised, and the text it gave."""

import json
import sys

from prometheus_client import CollectorRegistry, Counter, generate_latest

from qdebug.engine.watch_metrics import WatchCollector

folder, run = sys.argv[1:3]
registry = CollectorRegistry()
Counter("vllm:demo_requests", "a series of the server's own", registry=registry).inc()
registry.register(WatchCollector(folder, run))
try:
    print(json.dumps({"text": generate_latest(registry).decode()}))
except Exception as exc:  # what vLLM's /metrics would answer 4xx/5xx for
    print(json.dumps({"raised": f"{type(exc).__name__}: {exc}"[:300]}))
