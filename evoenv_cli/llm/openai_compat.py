"""The `openai` backend: any OpenAI-compatible chat-completions server over HTTP (`vllm serve`,
SGLang, the llama.cpp server, `transformers serve`, hosted APIs), with the standard library
only. How it retries, asks for `n` completions, seeds requests, names the length limit and
counts tokens: docs/backends.md.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import queue
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evoenv_cli.llm.base import (
    BackendConnectionError,
    BackendError,
    BackendKind,
    BaseBackend,
    Completion,
    Generation,
    Messages,
    SamplingConfig,
    normalize_finish_reason,
    one_line,
    register,
    request_seed,
)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass
class _Outcome:
    """What one request (after its retries) came to."""

    choices: list[tuple[str, str]] = field(default_factory=list)  # (text, finish reason)
    completion_tokens: int = 0
    prompt_tokens: int = 0
    error: str | None = None
    connection_error: bool = False  # the last failure never reached the server


def normalize_base_url(base_url: str) -> str:
    url = base_url.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BackendError(f"openai backend: base URL must be http(s)://host[:port][/path], got {base_url!r}")
    if parts.path in ("", "/"):
        url += "/v1"
    return url


def _share_tokens(total: int, texts: list[str]) -> list[int]:
    """Split `total` completion tokens over choices in proportion to their lengths."""
    if len(texts) == 1:
        return [total]
    weights = [max(len(t), 1) for t in texts]
    shares = [total * w // sum(weights) for w in weights]
    for k in range(total - sum(shares)):  # the remainder, one each from the first
        shares[k % len(shares)] += 1
    return shares


class OpenAIBackend(BaseBackend):
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        chat_template_kwargs: dict | None = None,
        extra_body: dict | None = None,
        request_seeds: bool = True,
    ):
        if base_url is None:
            raise BackendError(
                "the openai backend needs a server: pass --base-url "
                "(e.g. http://127.0.0.1:8000/v1) or set backend.base_url"
            )
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise BackendError(
                "openai backend: concurrency >= 1, max_retries >= 0, timeout_s > 0 and backoff_s >= 0 are required"
            )
        self.model = model
        self.base_url = normalize_base_url(base_url)
        self.url = self.base_url + "/chat/completions"
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.extra_body = dict(extra_body or {})
        self.request_seeds = request_seeds
        self.n_supported: bool | None = None  # learned from the first response to an n > 1 ask
        self.length_field = "max_completion_tokens"  # "max_tokens" once a server rejects it

    # -- one request -----------------------------------------------------------------------------
    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _body(self, messages: Messages, sampling: SamplingConfig, k: int, seed: int | None) -> dict:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            self.length_field: sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "stream": False,
        }
        if k > 1:
            body["n"] = k
        if seed is not None:
            body["seed"] = seed
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = self.chat_template_kwargs
        body.update(self.extra_body)
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(max(float(retry_after), 0.0), self.max_backoff_s)
            except ValueError:
                pass
        return random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))

    def request(self, messages: Messages, sampling: SamplingConfig, k: int = 1, seed: int | None = None) -> _Outcome:
        """One chat-completion request for `k` choices, with retries; never raises."""
        field = self.length_field
        data = json.dumps(self._body(messages, sampling, k, seed)).encode()
        last = _Outcome(error="no attempt made")
        for attempt in range(self.max_retries + 1):
            retry_after = None
            if field != self.length_field:  # another request learned the server's older field
                field = self.length_field
                data = json.dumps(self._body(messages, sampling, k, seed)).encode()
            try:
                req = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                parsed = self._parse(raw)
                if parsed.error is None:
                    return parsed
                last = parsed  # a 200 with an unusable body: try again
            except urllib.error.HTTPError as exc:
                detail = self._error_detail(exc)
                last = _Outcome(error=f"HTTP {exc.code} from {self.url}: {detail}")
                if exc.code in (400, 422) and field == "max_completion_tokens" and field in detail:
                    self.length_field = "max_tokens"  # an older server: say it the old way, at once
                    return self.request(messages, sampling, k, seed)
                if exc.code not in RETRY_STATUS:
                    return last
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    last = _Outcome(error=f"timed out after {self.timeout_s:g} s: {self.url}")
                else:  # refused, unknown host, unreachable network: never reached the server
                    last = _Outcome(error=f"cannot connect to {self.base_url}: {exc.reason}", connection_error=True)
            except TimeoutError:
                last = _Outcome(error=f"timed out after {self.timeout_s:g} s: {self.url}")
            except (OSError, http.client.HTTPException) as exc:  # reset or cut off mid-response
                last = _Outcome(
                    error=f"connection lost: {self.url}: {type(exc).__name__}: {exc}",
                    connection_error=isinstance(exc, ConnectionRefusedError),
                )
            if attempt < self.max_retries:
                time.sleep(self._delay(attempt, retry_after))
        return last

    @staticmethod
    def _error_detail(exc: urllib.error.HTTPError) -> str:
        try:
            body = exc.read().decode("utf-8", "replace")
        except Exception:
            body = ""
        try:
            err = json.loads(body)
            msg = err.get("error", err.get("detail", body)) if isinstance(err, dict) else body
            if isinstance(msg, dict):
                msg = msg.get("message", msg)
            body = str(msg)
        except ValueError:
            pass
        body = " ".join(body.split())
        return (body[:200] + "...") if len(body) > 200 else (body or exc.reason or "")

    @staticmethod
    def _parse(raw: bytes) -> _Outcome:
        try:
            payload = json.loads(raw)
            choices = payload["choices"]
            if not isinstance(choices, list) or not choices:
                raise ValueError("no choices")
            got = []
            for ch in sorted(choices, key=lambda c: c.get("index", 0)):
                msg = ch.get("message") or {}
                text = msg.get("content")
                got.append((text if isinstance(text, str) else "", normalize_finish_reason(ch.get("finish_reason"))))
            usage = payload.get("usage") or {}
            return _Outcome(
                choices=got,
                completion_tokens=int(usage.get("completion_tokens") or 0),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _Outcome(error=f"unreadable response ({type(exc).__name__}: {str(exc)[:100]})")

    # -- a batch of prompts ----------------------------------------------------------------------
    def generate(
        self, prompts: Sequence[Messages], sampling: SamplingConfig, *, prompt_ids: Sequence[int] | None = None
    ) -> list[Generation]:
        ids = self._check(prompts, sampling, prompt_ids)
        n = 1 if sampling.greedy else sampling.n  # greedy: one request, copied n times
        slots: list[list[Completion | None]] = [[None] * n for _ in prompts]
        prompt_tokens = [0] * len(prompts)
        errors: list[str | None] = [None] * len(prompts)
        sent = connection_failures = 0
        jobs: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                job = jobs.get()
                if job is None or stop.is_set():
                    return
                key, args = job
                try:
                    res = self.request(*args)
                except Exception as exc:  # a bug, not the server: still one answer per job
                    res = _Outcome(error=one_line(exc))
                done.put((key, res))

        def submit(i: int, j: int, k: int) -> None:
            nonlocal sent
            seed = request_seed(sampling.seed, ids[i], j) if self.request_seeds else sampling.seed
            jobs.put(((i, j, k, seed), (prompts[i], sampling, k, seed if self.request_seeds else None)))
            sent += 1

        # Daemon threads: Ctrl-C returns at once instead of waiting out requests in flight.
        threads = [
            threading.Thread(target=worker, daemon=True, name=f"evoenv-openai-{t}")
            for t in range(min(self.concurrency, max(1, len(prompts) * n)))
        ]
        for t in threads:
            t.start()
        try:
            for i in range(len(prompts)):
                if n > 1 and self.n_supported is False:
                    for j in range(n):
                        submit(i, j, 1)
                else:
                    submit(i, 0, n)
            received = 0
            self._report(0, sent)
            while received < sent:
                (i, j, k, seed), res = done.get()
                received += 1
                self._report(received, sent)  # requests answered (a retried one adds to both)
                if res.error is not None:
                    connection_failures += res.connection_error
                    errors[i] = errors[i] or res.error
                    for jj in range(j, j + k):
                        slots[i][jj] = Completion("", 0, "error", seed)
                    continue
                prompt_tokens[i] = prompt_tokens[i] or res.prompt_tokens
                got = res.choices[:k]
                tokens = _share_tokens(res.completion_tokens, [t for t, _ in got])
                self.generated_tokens += sum(tokens)
                for off, ((text, reason), ntok) in enumerate(zip(got, tokens)):
                    slots[i][j + off] = Completion(text, ntok, reason, seed)
                if k > 1:
                    self.n_supported = len(got) >= k
                for jj in range(j + len(got), j + k):  # the server gave fewer: ask again
                    submit(i, jj, 1)
        finally:
            stop.set()
            for _ in threads:
                jobs.put(None)
        if sent and connection_failures == sent:
            raise BackendConnectionError(
                f"{next(e for e in errors if e)} (every request failed to connect; "
                "is the OpenAI-compatible server running?)"
            )
        out = []
        for i in range(len(prompts)):
            comps = [c or Completion("", 0, "error") for c in slots[i]]
            if len(comps) < sampling.n:
                comps = [dataclasses.replace(comps[0]) for _ in range(sampling.n)]
            out.append(Generation(comps, prompt_tokens[i], errors[i]))
        return out


register(
    BackendKind(
        "openai",
        __name__,
        "OpenAIBackend",
        "an OpenAI-compatible server at --base-url",
        ("base_url", "api_key_env", "concurrency", "timeout_s", "max_retries"),
        local_model=False,
        follows_policy=False,  # a server started beforehand keeps serving the weights it loaded
    )
)
