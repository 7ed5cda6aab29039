"""A small OpenAI-compatible server that misbehaves on purpose (run as a subprocess by the endpoint tests).

Its answer to a body is a digest of the body's messages, so the same request always gets the same answer. It
serves the first `--healthy` chat requests (the isolated references) normally, then, by `--mode`:
`500` answers HTTP 500 to every request whose text asks a question, `die` exits after two more answers, `hang`
never answers a question, `auth` wants `Authorization: Bearer <--key>` and echoes a wrong key in
its 401 message (so the client's redaction is tested).
"""

import argparse
import asyncio
import hashlib
import json
import os

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--mode", choices=["500", "die", "hang", "auth"], required=True)
parser.add_argument("--healthy", type=int, default=0)
parser.add_argument("--key", default="")
opts = parser.parse_args()
app = FastAPI()
served = {"n": 0}


def digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()


def reply(body: dict) -> dict:
    text = f"answer {digest(body)[:8]}"
    return {"id": "x", "object": "chat.completion", "model": "fault", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


@app.get("/v1/models")
async def models(request: Request):
    if opts.mode == "auth" and request.headers.get("authorization") != f"Bearer {opts.key}":
        return JSONResponse({"error": {"message": f"invalid key {request.headers.get('authorization')}"}}, status_code=401)
    return {"object": "list", "data": [{"id": "fault", "object": "model"}]}


@app.post("/v1/chat/completions")
async def chat(request: Request):
    body = await request.json()
    if opts.mode == "auth":
        if request.headers.get("authorization") != f"Bearer {opts.key}":
            return JSONResponse({"error": {"message": f"invalid key {request.headers.get('authorization')}"}}, status_code=401)
        return reply(body)
    served["n"] += 1
    print(f"request {served['n']}", flush=True)  # tests wait on this log
    if served["n"] <= opts.healthy:
        return reply(body)
    odd = "?" in json.dumps(body.get("messages"))  # questions fail, statements pass
    if opts.mode == "500" and odd:
        return JSONResponse({"error": {"message": "engine overloaded"}}, status_code=500)
    if opts.mode == "hang" and odd:
        await asyncio.sleep(3600)
    if opts.mode == "die" and served["n"] > opts.healthy + 2:
        os._exit(1)
    return reply(body)


uvicorn.run(app, host="127.0.0.1", port=opts.port, log_level="warning")
