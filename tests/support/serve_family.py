"""A server shaped like `vllm serve --data-parallel-size N` for the managed-server tests: it
answers GET /health, starts a worker that leaves for a process group of its own (as vLLM's
data-parallel API servers do, os.setpgrp) and writes that worker's pid and the
CUDA_VISIBLE_DEVICES it was given to the file named by its first argument."""

import http.server
import json
import os
import subprocess
import sys

out, port = sys.argv[1], int(sys.argv[2])
worker = subprocess.Popen(
    [sys.executable, "-c", "import os, time; os.setpgrp(); time.sleep(600)"], start_new_session=False
)
with open(out, "w") as f:
    json.dump({"worker": worker.pid, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}, f)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
