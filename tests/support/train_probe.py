"""Stands in front of `evoenv train` as iterate.train_launch in the managed-server test: before
training starts it records whether every server the loop started (RUN/serve/servers.jsonl) is
gone (process reaped, port closed), then runs the real train command in its place."""

import json
import os
import socket
import sys
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


serve_dir = Path(sys.argv[1])
servers = [json.loads(x) for x in (serve_dir / "servers.jsonl").read_text().splitlines()]
record = {
    "servers": [{"pid": s["pid"], "port": s["port"], "model": s["model"]} for s in servers],
    "any_alive": any(alive(s["pid"]) for s in servers),
    "any_listening": any(listening(s["port"]) for s in servers),
    "state_file": (serve_dir / "server.json").exists(),
}
with (serve_dir / "at-train.jsonl").open("a") as f:
    f.write(json.dumps(record) + "\n")
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
