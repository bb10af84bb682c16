"""A real headless Chromium for tests that look at a page as a person would: it opens a file,
waits for it to load, evaluates JavaScript in it and takes a full-page screenshot.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages, NUL-terminated, on file descriptors 3 and 4), so no port, no websocket library and
no driver binary are needed. The flags are the ones this machine's closed network needs (no
background connections), with a fresh profile folder per browser.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium process with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 60.0):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium is not installed (apt-get install chromium)")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="evoenv-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        os.set_inheritable(to_child_r, True)
        os.set_inheritable(from_child_w, True)
        self.log = Path(self.profile) / "chromium.log"

        def fds() -> None:  # in the child: the pipe ends on 3 (commands in) and 4 (replies out)
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [exe, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=fds,
                close_fds=False,
                start_new_session=True,
            )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.session = None
        self.width, self.height = width, height

    # -- the protocol ----------------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        """Send one command and return its result; protocol errors raise RuntimeError."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError(f"chromium did not answer in {self.timeout} s")
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chromium exited with {self.proc.returncode}: {self.log.read_text(errors='replace')[-2000:]}"
                )
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def __enter__(self) -> Browser:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("Browser.close", session=False)
                self.proc.wait(timeout=10)
        except (OSError, RuntimeError, TimeoutError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
            os.close(self._to_child)
            os.close(self._from_child)
            shutil.rmtree(self.profile, ignore_errors=True)

    # -- what a test does --------------------------------------------------------------------------
    def open(self, path: Path) -> None:
        """Load a file and wait until the document and every image have finished loading."""
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()})
        deadline = time.monotonic() + self.timeout
        while self.evaluate("document.readyState") != "complete" or not self.evaluate(
            "Array.from(document.images).every(i => i.complete)"
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not finish loading in {self.timeout} s")
            time.sleep(0.1)

    def evaluate(self, expression: str):
        """The JSON value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        """A PNG of the whole page at 1 CSS pixel per pixel (taller than the window if need be)."""
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        return base64.b64decode(shot["data"])
