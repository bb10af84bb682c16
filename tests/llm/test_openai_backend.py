"""The `openai` backend for real: against a real `transformers serve` on 127.0.0.1 serving the
tiny model (started, health-checked and stopped by PID here), and against a small local
`http.server` that misbehaves on purpose (429s, 500s, 400s, timeouts, servers that honour `n`),
plus a port where nothing listens."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import free_port

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from evoenv_cli.llm import (  # noqa: E402
    BackendConnectionError,
    BackendError,
    SamplingConfig,
    make_backend,
    request_seed,
)

PROMPTS = [
    [{"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "Sort a list."}],
    [{"role": "user", "content": "Hi"}],
]


# -- a real transformers serve ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tiny_model):
    return tiny_model


@pytest.fixture(scope="module")
def served(served_tiny_model):
    return served_tiny_model


@pytest.mark.slow
def test_real_server_n_is_emulated_with_separate_requests(served, model_dir):
    from transformers import AutoTokenizer

    backend = make_backend("openai", str(model_dir), base_url=served, concurrency=2)
    sampling = SamplingConfig(n=2, temperature=1.0, max_tokens=8, seed=11)
    gens = backend.generate(PROMPTS, sampling)
    assert backend.n_supported is False  # transformers serve answers one choice whatever n is
    tok = AutoTokenizer.from_pretrained(model_dir)
    assert len(gens) == 3
    for i, (conv, g) in enumerate(zip(PROMPTS, gens)):
        assert g.error is None and len(g.completions) == 2
        rendered = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
        assert g.prompt_tokens == len(tok(rendered, add_special_tokens=False)["input_ids"])
        for j, c in enumerate(g.completions):
            assert isinstance(c.text, str) and 0 < c.tokens <= 8
            assert c.finish_reason in ("stop", "length")
            assert c.seed == request_seed(11, i, j)  # each completion its own request and seed
    # now known: later calls go straight to separate requests
    (g,) = backend.generate(PROMPTS[:1], SamplingConfig(n=3, max_tokens=4, seed=1))
    assert len(g.completions) == 3 and g.ok
    backend.close()


@pytest.mark.slow
def test_real_server_greedy_and_a_refused_model_name(served, model_dir):
    backend = make_backend("openai", str(model_dir), base_url=served)
    (g,) = backend.generate(PROMPTS[:1], SamplingConfig(n=2, temperature=0, max_tokens=6))
    assert g.ok and len(g.completions) == 2 and len(set(g.texts)) == 1
    assert all(c.tokens == 6 or c.finish_reason == "stop" for c in g.completions)
    # the server serves one model: another name is a 400, recorded (not raised, not retried)
    other = make_backend("openai", "no-such-model", base_url=served, backoff_s=5)
    t0 = time.monotonic()
    (g,) = other.generate(PROMPTS[:1], SamplingConfig(max_tokens=4))
    assert time.monotonic() - t0 < 5
    assert g.error and "HTTP 400" in g.error and g.completions[0].finish_reason == "error"


# -- a scripted local server -----------------------------------------------------------------------
def completion_json(texts, completion_tokens=6, prompt_tokens=9, finish="stop"):
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": k, "message": {"role": "assistant", "content": t}, "finish_reason": finish}
            for k, t in enumerate(texts)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class Scripted:
    """A local server; `respond(body, count)` -> (status, payload dict or None, delay, headers)."""

    def __init__(self, respond):
        self.respond, self.requests, self.lock = respond, [], threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                    count = len(outer.requests)
                status, payload, delay, headers = outer.respond(body, count)
                time.sleep(delay)
                data = json.dumps(payload if payload is not None else {"error": {"message": "nope"}}).encode()
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def fast(url, **kw):
    return make_backend("openai", "m", base_url=url, backoff_s=0.01, max_backoff_s=0.05, **kw)


def test_429_twice_then_200_is_retried_with_backoff(monkeypatch):
    monkeypatch.setenv("EVOENV_TEST_KEY", "sk-test")

    def respond(body, count):
        if count <= 2:
            return 429, None, 0, {"Retry-After": "0"}
        return 200, completion_json(["<answer>4</answer>"]), 0, None

    with Scripted(respond) as srv:
        backend = fast(srv.url, api_key_env="EVOENV_TEST_KEY", max_retries=4)
        (g,) = backend.generate(PROMPTS[:1], SamplingConfig(max_tokens=7, temperature=0.5, seed=3))
    assert g.ok and g.texts == ["<answer>4</answer>"]
    assert g.completions[0].tokens == 6 and g.prompt_tokens == 9 and g.completions[0].finish_reason == "stop"
    assert len(srv.requests) == 3
    req = srv.requests[-1]
    assert req["path"] == "/v1/chat/completions"  # a bare host:port gets /v1
    assert req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "m" and req["body"]["messages"] == PROMPTS[0]
    assert req["body"]["max_completion_tokens"] == 7 and req["body"]["temperature"] == 0.5
    assert req["body"]["seed"] == request_seed(3, 0, 0) and "n" not in req["body"]


def test_500_forever_is_an_error_on_the_generation_not_a_raise(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def respond(body, count):
        if "fine" in body["messages"][0]["content"]:
            return 200, completion_json(["ok"]), 0, None
        return 500, None, 0, None

    prompts = [[{"role": "user", "content": "break"}], [{"role": "user", "content": "fine"}]]
    with Scripted(respond) as srv:
        gens = fast(srv.url, max_retries=2).generate(prompts, SamplingConfig(n=1))
    assert "HTTP 500" in gens[0].error and gens[0].completions[0].finish_reason == "error"
    assert gens[1].ok and gens[1].texts == ["ok"]
    assert sum("break" in r["body"]["messages"][0]["content"] for r in srv.requests) == 3  # 1 + 2 retries
    assert all(r["auth"] is None for r in srv.requests)  # no key set: no header


def test_a_400_is_final_and_a_slow_server_times_out():
    with Scripted(lambda body, count: (400, {"error": {"message": "bad field"}}, 0, None)) as srv:
        (g,) = fast(srv.url, max_retries=3).generate(PROMPTS[:1], SamplingConfig())
    assert len(srv.requests) == 1 and "HTTP 400" in g.error and "bad field" in g.error
    with Scripted(lambda body, count: (200, completion_json(["late"]), 1.0, None)) as srv:
        (g,) = fast(srv.url, max_retries=1, timeout_s=0.2).generate(PROMPTS[:1], SamplingConfig())
    assert "timed out" in g.error and len(srv.requests) == 2


def test_a_server_that_honours_n_gets_one_request_per_prompt():
    def respond(body, count):
        k = body.get("n", 1)
        return (
            200,
            completion_json([f"a{j}" * (j + 1) for j in range(k)], completion_tokens=10, finish="length"),
            0,
            None,
        )

    with Scripted(respond) as srv:
        backend = fast(srv.url)
        gens = backend.generate(PROMPTS, SamplingConfig(n=3, seed=5))
    assert len(srv.requests) == 3 and all(r["body"]["n"] == 3 for r in srv.requests)
    assert backend.n_supported is True
    for i, g in enumerate(gens):
        assert g.texts == ["a0", "a1a1", "a2a2a2"]
        assert sum(c.tokens for c in g.completions) == 10  # usage shared out by length
        assert [c.finish_reason for c in g.completions] == ["length"] * 3
        assert all(c.seed == request_seed(5, i, 0) for c in g.completions)


def test_prompt_ids_give_stable_seeds_across_calls():
    with Scripted(lambda body, count: (200, completion_json(["x"]), 0, None)) as srv:
        backend = fast(srv.url)
        backend.generate(PROMPTS, SamplingConfig(seed=9), prompt_ids=[100, 101, 102])
        backend.generate(PROMPTS[1:], SamplingConfig(seed=9), prompt_ids=[101, 102])
    seeds = [r["body"]["seed"] for r in srv.requests]
    assert sorted(seeds[:3]) == sorted(request_seed(9, p, 0) for p in (100, 101, 102))
    assert sorted(seeds[3:]) == sorted(request_seed(9, p, 0) for p in (101, 102))


def test_without_request_seeds_no_request_carries_one():
    """The managed vLLM server's way (seeded once): a seed per request is vLLM's slow path."""
    with Scripted(lambda body, count: (200, completion_json(["x"]), 0, None)) as srv:
        gens = fast(srv.url, request_seeds=False).generate(PROMPTS, SamplingConfig(n=2, seed=9))
    assert srv.requests and all("seed" not in r["body"] for r in srv.requests)
    assert all(c.seed == 9 for g in gens for c in g.completions)  # recorded, not sent


def test_no_server_at_all_is_one_clear_error():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    backend = make_backend("openai", "m", base_url=url, max_retries=1, backoff_s=0.01)
    with pytest.raises(BackendConnectionError) as e:
        backend.generate(PROMPTS, SamplingConfig(n=2))
    msg = str(e.value)
    assert url in msg and "\n" not in msg and "running" in msg


def test_bad_configuration_is_refused():
    with pytest.raises(BackendError, match="base-url"):
        make_backend("openai", "m")
    with pytest.raises(BackendError, match="http"):
        make_backend("openai", "m", base_url="127.0.0.1:8000")
    with pytest.raises(BackendError, match="did you mean 'concurrency'"):
        make_backend("openai", "m", base_url="http://x", concurency=2)


def test_max_completion_tokens_with_a_fallback_for_servers_that_reject_it():
    def modern(body, count):
        return 200, completion_json(["ok"]), 0, None

    with Scripted(modern) as srv:
        fast(srv.url).generate(PROMPTS[:1], SamplingConfig(max_tokens=7))
    body = srv.requests[0]["body"]
    assert body["max_completion_tokens"] == 7 and "max_tokens" not in body

    def older(body, count):  # as OpenAI-style servers word it for a field they do not know
        if "max_completion_tokens" in body:
            return 400, {"error": {"message": "Unrecognized request argument supplied: max_completion_tokens"}}, 0, None
        return 200, completion_json(["ok"]), 0, None

    with Scripted(older) as srv:
        backend = fast(srv.url, concurrency=1)
        gens = backend.generate(PROMPTS, SamplingConfig(max_tokens=5))
    assert all(g.ok and g.texts == ["ok"] for g in gens)
    fields = [("max_completion_tokens" in r["body"], r["body"].get("max_tokens")) for r in srv.requests]
    assert fields == [(True, None), (False, 5), (False, 5), (False, 5)]  # learned once, then kept
    assert backend.length_field == "max_tokens"

    def unrelated(body, count):  # a 400 about something else is final, the field stays
        return 400, {"error": {"message": "temperature must be positive"}}, 0, None

    with Scripted(unrelated) as srv:
        backend = fast(srv.url)
        (g,) = backend.generate(PROMPTS[:1], SamplingConfig(max_tokens=5))
    assert g.error and len(srv.requests) == 1 and backend.length_field == "max_completion_tokens"
