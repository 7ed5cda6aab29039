"""`qdebug replay --endpoint` against `transformers serve` on the demo checkpoint (a real server on a loopback port)."""

import pytest

from .conftest import CHECKPOINT, SAMPLE, Server, free_port, load_json, run_qdebug


@pytest.fixture(scope="module")
def hf_server(module_tmp):
    port = free_port()
    server = Server(["transformers", "serve", str(CHECKPOINT), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
                    port, module_tmp / "transformers-serve.log", env={"HF_HUB_OFFLINE": "1"}).wait_ready()
    yield server
    server.stop()


def test_clean_replay_is_all_ok_and_equals_the_local_references(hf_server, tmp_path):
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(SAMPLE / "capture.jsonl"), "--endpoint", hf_server.url, "--concurrency", "4",
                        "--model", "demo", "--device", "cpu", "--json", str(out))
    assert result.returncode == 0, result.stderr
    doc = load_json(out)
    assert doc["mode"] == "endpoint" and doc["endpoint"] == f"{hf_server.url}/v1" and doc["repeats"] == 1
    assert doc["served_model"] == str(CHECKPOINT)  # from the server's /v1/models
    assert len(doc["requests"]) == 14
    for r in doc["requests"]:
        assert r["verdict"] == "ok", r
        assert r["reference"] == r["local_reference"], r  # the server's answer is the model's own answer
        assert r["burst_answers"] == [r["reference"]] and r["burst_verdicts"] == ["ok"]
        assert not r["reference"].startswith("<|im_start|>")
    assert not [f for f in doc["findings"] if f["kind"] in ("contamination", "server_mismatch", "request_error")]


def test_the_demo_tokenizer_tells_the_server_where_the_answer_starts():
    """The server's response parser finds the answer after the decoded prompt (it kept `<|im_start|> assistant` before)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(CHECKPOINT)
    prompt = tok.apply_chat_template([{"role": "user", "content": [{"type": "text", "text": "Describe the image."}]}], add_generation_prompt=True, tokenize=True)
    prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    answer = tok("a red circle in the top left<|im_end|>")["input_ids"]
    assert tok.parse_response(answer, prefix=tok.decode(prompt))["content"] == "a red circle in the top left"
