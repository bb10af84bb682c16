"""OpenRLHF drives evoenv the way its SingleTurnAgentExecutor does: it keeps only `input`,
`label` and `datasource` of a row, applies the chat template, decodes prompt + response tokens
into a query (skip_special_tokens=False), then either loads `reward_func` from a .py file by
path (`--reward.remote_url /path/rewards.py`, one query per call, calls in threads) or POSTs
{"query", "prompts", "labels"} to `evoenv serve-reward` with aiohttp."""

import asyncio
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import SEEDS, free_port, start_serve_reward

from evoenv_cli.integrations import rewards
from evoenv_cli.integrations.rewards import extract_answer

PLANTED = "graph_coloring_planted"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("orl") / "rows.jsonl"
    r = subprocess.run(
        [
            Path(sys.executable).with_name("evoenv"),
            "sample",
            SEEDS,
            "--out",
            out,
            "-n",
            "2",
            "--format",
            "openrlhf",
            "--difficulty",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def as_openrlhf(row, tokenizer, response):
    """(query, prompt, label) as OpenRLHF builds them from a dataset row and a response."""
    kept = {k: row[k] for k in ("input", "label", "datasource")}  # every other column is dropped
    prompt = tokenizer.apply_chat_template(kept["input"], tokenize=False, add_generation_prompt=True)
    ids = (
        tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
        + tokenizer(text=response, add_special_tokens=False)["input_ids"]
    )
    return tokenizer.decode(ids, skip_special_tokens=False), prompt, kept["label"]


def _other_coloring(reference):
    return " ".join(str((int(c) + 1) % 3) for c in reference.split())


def test_rows_keep_everything_in_the_label(rows):
    assert all(set(r) == {"input", "label", "datasource"} for r in rows)
    label = json.loads(rows[0]["label"])
    assert {"env_id", "env_name", "instance", "answer"} <= set(label)
    assert isinstance(label["instance"], str) and rows[0]["datasource"] == f"evoenv/{label['env_name']}"


def test_reward_func_loaded_from_its_file_like_openrlhf(rows, tokenizer, monkeypatch):
    monkeypatch.setenv("EVOENV_LIBRARY", str(SEEDS))
    spec = importlib.util.spec_from_file_location("reward_func", rewards.__file__)  # as OpenRLHF does
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reward_func = module.reward_func

    planted = next(r for r in rows if r["datasource"] == f"evoenv/{PLANTED}")
    truth = json.loads(planted["label"])["answer"]
    cases = [(r, f"Let me think. <answer>{json.loads(r['label'])['answer']}</answer>", 1.0) for r in rows]
    cases += [
        (planted, f"<answer>{_other_coloring(truth)}</answer>", 1.0),  # another valid answer
        (planted, "I am not sure.", 0.0),
        (rows[0], "<answer>surely wrong</answer>", 0.0),
    ]
    triples = [as_openrlhf(r, tokenizer, text) for r, text, _ in cases]
    # the bug this guards against: the instruction itself holds "<answer> and </answer>"
    assert extract_answer(triples[-2][0]) == "and"

    async def rollouts():  # one query per call, in threads, as _fetch_rewards_via_func does
        return await asyncio.gather(*[asyncio.to_thread(reward_func, [q], [p], [lab]) for q, p, lab in triples])

    results = asyncio.run(rollouts())
    got = [float(res["rewards"][0]) for res in results]
    assert got == [want for _, _, want in cases]
    import torch

    assert all(isinstance(res["rewards"], torch.Tensor) and isinstance(res["scores"], torch.Tensor) for res in results)
    assert float(results[-2]["extra_logs"]["evoenv_answered"][0]) == 0.0
    assert float(results[-2]["extra_logs"]["evoenv_prompt_found"][0]) == 1.0


def test_prompt_is_found_when_decoding_changes_its_start():
    prompt = (
        "<|im_start|>user\n" + "Count the ways. " * 20 + "Say it between <answer> and </answer>."
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    assert rewards.response_of(prompt + "ok <answer>3</answer>", prompt) == "ok <answer>3</answer>"
    assert rewards.response_of("<s>" + prompt[1:] + "hi", prompt) == "hi"  # first character decoded otherwise
    assert rewards.response_of("something else entirely", prompt) is None

    class Known:  # the one environment a stand-in library holds; nothing reaches its sandbox
        def resolve(self, env_id, env_name=None):
            return env_id

    out = rewards.score_queries(
        ["something else <answer> and </answer>"],
        [prompt],
        [json.dumps({"env_id": "x", "instance": "{}"})],
        reward=Known(),
    )
    assert out["rewards"] == [0.0] and out["extra_logs"]["evoenv_prompt_found"] == [0.0]


@pytest.mark.parametrize(
    "label, needle",
    [
        ("not json", "label 0 is not JSON"),
        (json.dumps({"answer": "1"}), "label 0 is not an evoenv label"),
        ("7", "label 0 is not an evoenv label"),
    ],
)
def test_labels_that_are_not_evoenvs_are_named(label, needle):
    with pytest.raises(ValueError, match=needle):
        rewards.score_queries(["q"], ["q"], [label], reward=object())


# -- evoenv serve-reward -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    url, proc, health = start_serve_reward(SEEDS, log)
    assert health["environments"] == 10
    yield url, proc, log
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def post(url, body, content_type="application/json"):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.slow
def test_serve_reward_answers_openrlhfs_aiohttp_requests_concurrently(server, rows, tokenizer):
    import aiohttp

    url, _, _ = server
    planted = next(r for r in rows if r["datasource"] == f"evoenv/{PLANTED}")
    truth = json.loads(planted["label"])["answer"]
    cases = [(r, f"<answer>{json.loads(r['label'])['answer']}</answer>", 1.0) for r in rows]
    cases += [(planted, f"<answer>{_other_coloring(truth)}</answer>", 1.0), (planted, "no idea", 0.0)]
    triples = [as_openrlhf(r, tokenizer, text) for r, text, _ in cases]

    async def rollouts():  # as _fetch_rewards_via_http posts: one request per rollout, all at once
        timeout = aiohttp.ClientTimeout(total=180)

        async def one(q, p, lab):
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(
                    url + "/get_reward", json={"query": [q], "prompts": [p], "labels": [lab]}
                ) as resp:
                    resp.raise_for_status()
                    return await resp.json()

        return await asyncio.gather(*[one(*t) for t in triples])

    results = asyncio.run(rollouts())
    assert [res["rewards"][0] for res in results] == [want for _, _, want in cases]
    assert results[-1]["extra_logs"]["evoenv_answered"] == [0.0]
    # one request with the whole batch, too
    status, batch = post(
        url + "/get_reward",
        json.dumps(
            {"query": [t[0] for t in triples], "prompts": [t[1] for t in triples], "labels": [t[2] for t in triples]}
        ).encode(),
    )
    assert status == 200 and batch["rewards"] == [want for _, _, want in cases]


@pytest.mark.parametrize(
    "body, status, needle",
    [
        (b"{not json", 400, "body is not JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (json.dumps({"query": ["q"], "prompts": ["q"]}).encode(), 400, '"labels" must be a list'),
        (json.dumps({"query": ["q"], "prompts": [], "labels": []}).encode(), 400, "differ in length"),
        (json.dumps({"query": [1], "prompts": ["p"], "labels": ["{}"]}).encode(), 400, '"query"[0] is not a string'),
        (json.dumps({"query": ["q"], "prompts": ["q"], "labels": ["x"]}).encode(), 400, "label 0 is not JSON"),
        (
            json.dumps(
                {"query": ["qa"], "prompts": ["q"], "labels": [json.dumps({"env_id": "0" * 16, "instance": "{}"})]}
            ).encode(),
            400,
            "not in the reward's library",
        ),
    ],
)
@pytest.mark.slow
def test_serve_reward_bad_bodies_get_a_clear_4xx(server, body, status, needle):
    url, _, _ = server
    code, payload = post(url + "/get_reward", body)
    assert code == status and needle in payload["error"]


@pytest.mark.slow
def test_serve_reward_wrong_path_and_missing_length(server):
    url, _, _ = server
    assert post(url + "/reward", b"{}")[0] == 404
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n")
        assert s.recv(1000).startswith(b"HTTP/1.1 411")


@pytest.mark.slow
def test_serve_reward_survives_a_client_that_disconnects_mid_request(server, rows, tokenizer):
    url, proc, log = server
    host, port = url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(
                b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 5000\r\n\r\n{"query": ["'
            )
        # and one that leaves before reading its (slow to compute) answer
    q, p, lab = as_openrlhf(rows[0], tokenizer, "<answer>1</answer>")
    body = json.dumps({"query": [q] * 64, "prompts": [p] * 64, "labels": [lab] * 64}).encode()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(
            b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
    time.sleep(0.5)
    right = json.loads(rows[0]["label"])["answer"]
    q, p, lab = as_openrlhf(rows[0], tokenizer, f"<answer>{right}</answer>")
    status, payload = post(url + "/get_reward", json.dumps({"query": [q], "prompts": [p], "labels": [lab]}).encode())
    assert status == 200 and payload["rewards"] == [1.0]
    assert proc.poll() is None
    text = log.read_text()
    assert "left after" in text and "Traceback" not in text


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_serve_reward_stops_cleanly_on_a_signal_in_the_middle_of_requests(how):
    """The stop signal lands while requests keep coming, so it meets the main thread starting
    a request's thread. Raised into it from a handler, it once left that wait's lock released:
    the request failed with "release unlocked lock", the stop was lost, and the server served
    on (CI, 2026-12-06). Four signals, each while eight clients ask /health without a pause
    (the old handler failed a request or hung on 2 of 20 such signals, measured)."""
    for _ in range(4):
        port = free_port()
        proc = subprocess.Popen(
            [Path(sys.executable).with_name("evoenv"), "serve-reward", "--library", SEEDS, "--port", str(port)],
            stderr=subprocess.PIPE,
            text=True,
        )
        health = f"http://127.0.0.1:{port}/health"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(health, timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        asked = []

        def ask(proc=proc, health=health, asked=asked):
            while proc.poll() is None:
                try:
                    urllib.request.urlopen(health, timeout=1).close()
                    asked.append(1)
                except OSError:
                    pass

        clients = [threading.Thread(target=ask, daemon=True) for _ in range(8)]
        for client in clients:
            client.start()
        while len(asked) < 50:
            time.sleep(0.005)
        proc.send_signal(how)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"still serving 30 s after {how.name}: {proc.communicate()[1][-600:]}") from None
        for client in clients:
            client.join(5)
        assert proc.returncode == 0 and "stopped" in stderr, stderr
        assert "Traceback" not in stderr and "failed" not in stderr, stderr


@pytest.mark.slow
def test_serve_reward_port_in_use_is_one_line_exit_2(evoenv):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = evoenv("serve-reward", "--library", SEEDS, "--port", port)
    assert r.returncode == 2 and "cannot listen" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_many_threads_share_one_reward(rows, tokenizer, monkeypatch):
    """A reward worker's threads all score through the process's one EnvReward."""
    monkeypatch.setenv("EVOENV_LIBRARY", str(SEEDS))
    right = json.loads(rows[0]["label"])["answer"]
    q, p, lab = as_openrlhf(rows[0], tokenizer, f"<answer>{right}</answer>")
    before = set(rewards._shared)
    with ThreadPoolExecutor(8) as ex:
        outs = list(ex.map(lambda _: rewards.reward_func([q], [p], [lab]), range(32)))
    assert all(float(o["rewards"][0]) == 1.0 for o in outs)
    assert len(set(rewards._shared) - before) <= 1  # at most the one for this library, never one per call
    assert rewards.shared_reward().pool.spawned <= 2
