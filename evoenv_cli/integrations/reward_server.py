"""`evoenv serve-reward`: OpenRLHF's remote reward model over HTTP (`--reward.remote_url
http://HOST:PORT/get_reward`), scoring through one `EnvReward` for the whole server.

OpenRLHF posts `{"query": [...], "prompts": [...], "labels": [...]}` (queries are prompt +
response, labels the JSON strings `sample --format openrlhf` writes) and reads back
`{"rewards": [...], "scores": [...], "extra_logs": {...}}`. Requests are served concurrently
(a thread each; the sandbox pool is shared and thread-safe). A body that is not such a request
gets a 4xx with a one-line JSON error; a client that goes away mid-request costs only its own
thread. Standard library only: nothing to install beyond evoenv.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evoenv_cli.integrations.rewards import EnvReward, score_queries

PATH = "/get_reward"
MAX_BODY_BYTES = 256 * 1024 * 1024
READ_TIMEOUT_S = 60.0


class BadRequest(Exception):
    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


def parse_request(body: bytes) -> tuple[list, list, list]:
    """(queries, prompts, labels) of an OpenRLHF reward request, or BadRequest."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"body is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise BadRequest(HTTPStatus.BAD_REQUEST, 'body must be a JSON object with "query", "prompts" and "labels"')
    fields = []
    for key in ("query", "prompts", "labels"):
        value = payload.get(key)
        if not isinstance(value, list):
            raise BadRequest(HTTPStatus.BAD_REQUEST, f'"{key}" must be a list')
        fields.append(value)
    queries, prompts, labels = fields
    if not (len(queries) == len(prompts) == len(labels)):
        raise BadRequest(
            HTTPStatus.BAD_REQUEST,
            f'"query", "prompts" and "labels" differ in length ({len(queries)}, {len(prompts)}, {len(labels)})',
        )
    for key, values in (("query", queries), ("prompts", prompts)):
        bad = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
        if bad is not None:
            raise BadRequest(HTTPStatus.BAD_REQUEST, f'"{key}"[{bad}] is not a string')
    return queries, prompts, labels


POLL_S = 0.2  # how often the serving loop looks for a stop signal when no request comes


class RewardServer(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never keeps the server from stopping

    def __init__(self, address: tuple[str, int], reward: EnvReward, log=None):
        self.reward = reward
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.served = 0
        self.rejected = 0
        self._count = threading.Lock()
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}{PATH}"

    def handle_error(self, request, client_address) -> None:
        """One line, never a traceback: a client that hung up while its answer was written
        (the flush after the handler) is a normal event for a server."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            self.log(f"serve-reward: client {client_address[0]} left before its answer")
        else:
            self.log(f"serve-reward: request from {client_address[0]} failed: {type(exc).__name__}: {exc}")

    def count(self, ok: bool) -> None:
        with self._count:
            if ok:
                self.served += 1
            else:
                self.rejected += 1


class _Handler(BaseHTTPRequestHandler):
    server: RewardServer
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT_S  # a client that stops sending frees its thread after this

    def log_message(self, format: str, *args: Any) -> None:  # requests are not logged one by one
        return

    def _send(self, status: HTTPStatus, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client left before its answer: nothing to do

    def _fail(self, status: HTTPStatus, message: str) -> None:
        self.server.count(False)
        self.server.log(f"serve-reward: {status.value} {self.command} {self.path}: {message}")
        self._send(status, {"error": message})

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(
                HTTPStatus.OK,
                {
                    "status": "ok",
                    "environments": len(self.server.reward.envs),
                    "served": self.server.served,
                    "rejected": self.server.rejected,
                },
            )
        else:
            self._fail(HTTPStatus.NOT_FOUND, f"no such path (POST {PATH}, GET /health)")

    def do_POST(self) -> None:
        if self.path != PATH:
            self._fail(HTTPStatus.NOT_FOUND, f"no such path (POST {PATH})")
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._fail(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
            return
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            self._fail(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY_BYTES} bytes")
            return
        try:
            body = self.rfile.read(int(length))
        except (TimeoutError, ConnectionResetError, OSError):
            body = b""
        if len(body) < int(length):  # the client hung up (or stalled) mid-body
            self.close_connection = True
            self.server.count(False)
            self.server.log(f"serve-reward: client {self.client_address[0]} left after {len(body)} of {length} bytes")
            return
        try:
            queries, prompts, labels = parse_request(body)
            result = score_queries(queries, prompts, labels, self.server.reward)
        except BadRequest as exc:
            self._fail(exc.status, str(exc))
            return
        except (ValueError, KeyError) as exc:  # a label that is not evoenv's, an unknown environment
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            self._fail(HTTPStatus.BAD_REQUEST, str(message))
            return
        except Exception as exc:  # a bug or a broken sandbox: the client sees 500, the server lives
            self._fail(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            return
        self.server.count(True)
        self._send(HTTPStatus.OK, result)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def serve(reward: EnvReward, host: str = "127.0.0.1", port: int = 5000, log=None, ready=None) -> None:
    """Serve until Ctrl-C or SIGTERM (a process manager, `kill`), then raise KeyboardInterrupt
    once the socket is closed; `ready(server)` is called once the socket listens.

    In the main thread the signals only set a flag that the serving loop reads between
    requests (every POLL_S). Raised from a handler instead, the interrupt landed wherever the
    main thread was, once inside `Thread.start`'s wait for a request's thread: the condition's
    lock was left released, the RuntimeError ("release unlocked lock") was logged as a failed
    request, the interrupt was lost, and the server never stopped (a CI run, 2026-12-06).
    Off the main thread (a test, a library) it serves until `server.shutdown()`."""
    stopped: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    before = {s: signal.signal(s, lambda signum, frame: stopped.append(signum)) for s in STOP_SIGNALS} if main else {}
    try:
        with RewardServer((host, port), reward, log) as server:
            server.timeout = POLL_S
            if ready:
                ready(server)
            try:
                if not main:
                    server.serve_forever(poll_interval=POLL_S)
                else:
                    while not stopped:
                        server.handle_request()  # one request, or POLL_S of none
            finally:
                server.server_close()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    if stopped:
        raise KeyboardInterrupt
