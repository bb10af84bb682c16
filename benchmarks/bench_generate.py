"""CPU generation speed on the starter model, measured side by side in one run.

- `hf`: evoenv's hf backend (chat template, batching, seeds, finish reasons) on a batch of the
  seeds' real prompts;
- `bare`: transformers `model.generate` on the very same token ids, batch by batch, with the
  same padding and sampling settings: what the backend costs over the library call it wraps
  (target: at most 5% overhead);
- `bf16`: the hf backend with `dtype: bfloat16` (CPUs with AVX512-BF16 or AMX run it natively);
- `openai+serve`: `transformers serve` on 127.0.0.1 through the openai backend.

Prints `bench generate: ...` lines with tokens per second. Needs the starter model: it is
built offline into runs/starter-model when missing (`evoenv starter-model`).
Run: `make bench-generate`, or `python benchmarks/bench_generate.py [--prompts 32 --tokens 64]`.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoenv_cli.artifacts import EnvLibrary  # noqa: E402
from evoenv_cli.config import AnswerConfig, SampleConfig  # noqa: E402
from evoenv_cli.llm import make_backend  # noqa: E402
from evoenv_cli.llm.base import SamplingConfig  # noqa: E402
from evoenv_cli.llm.starter import build_starter_model  # noqa: E402
from evoenv_cli.runtime.workers import SandboxWorkers  # noqa: E402
from evoenv_cli.stages import sample  # noqa: E402


def prompts(count: int) -> list[list[dict]]:
    lib = EnvLibrary.open(ROOT / "seeds")
    cfg = SampleConfig(per_env=max(1, count // len(lib.files) + 1), seed=7, difficulty=1, demonstrations=1)
    answer = AnswerConfig(instruction="Give your final answer between <{tag}> and </{tag}>.")
    with SandboxWorkers() as pool:
        rows = sample.run(lib, cfg, pool, answer=answer).rows
    return [r["prompt"] for r in rows[:count]]


def bare_generate(backend, convs, sampling: SamplingConfig) -> int:
    """model.generate (greedy) on the backend's own encodings and batches; returns new tokens."""
    import torch

    tok, lm = backend.tokenizer, backend.lm
    encoded = [tok(backend.render(c), add_special_tokens=False)["input_ids"] for c in convs]
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
    total = 0
    for start in range(0, len(order), backend.batch_size):
        batch = [encoded[i] for i in order[start : start + backend.batch_size]]
        width = max(len(x) for x in batch)
        ids = torch.full((len(batch), width), backend.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, seq in enumerate(batch):
            ids[r, width - len(seq) :] = torch.tensor(seq)
            mask[r, width - len(seq) :] = 1
        with torch.inference_mode():
            out = lm.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=sampling.max_tokens,
                do_sample=False,
                temperature=1.0,
                top_p=1.0,
                top_k=None,
                pad_token_id=backend.pad_id,
                eos_token_id=backend.eos_ids,
            )
        eos = set(backend.eos_ids)
        for row in out[:, width:].tolist():
            stop = next((k for k, t in enumerate(row) if t in eos), None)
            total += len(row) if stop is None else stop + 1
    return total


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(model: Path):
    exe = Path(sys.executable).with_name("transformers")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("transformers serve did not come up in 120 s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "runs" / "starter-model"))
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--skip-serve", action="store_true")
    args = ap.parse_args()
    build_starter_model(args.model)
    convs = prompts(args.prompts)
    # greedy: both sides then generate exactly the same tokens in the same batches
    sampling = SamplingConfig(n=1, temperature=0.0, max_tokens=args.tokens, seed=0)
    hf = make_backend("hf", args.model, device="cpu", batch_size=args.batch_size)
    hf.generate(convs[:2], SamplingConfig(n=1, temperature=1.0, max_tokens=4))  # warm up
    # interleaved repeats: a loaded machine's drift hits both sides alike
    hf_s = bare_s = 0.0
    hf_tok = bare_tok = 0
    for _ in range(2):
        gens, s = timed(lambda: hf.generate(convs, sampling))
        hf_s += s
        hf_tok += sum(c.tokens for g in gens for c in g.completions)
        n, s = timed(lambda: bare_generate(hf, convs, sampling))
        bare_s += s
        bare_tok += n
    hf_rate, bare_rate = hf_tok / hf_s, bare_tok / bare_s
    overhead = (hf_s / hf_tok) / (bare_s / bare_tok) - 1
    print(
        f"bench generate: path=hf prompts={len(convs)} tokens={hf_tok} tokens_per_s={hf_rate:.1f} "
        f"bare_tokens_per_s={bare_rate:.1f} overhead={overhead:+.3f} (target <= +0.05) "
        f"batch_size={args.batch_size} threads={os.environ.get('OMP_NUM_THREADS', 'all')}",
        flush=True,
    )
    hf.close()
    bf = make_backend("hf", args.model, device="cpu", dtype="bfloat16", batch_size=args.batch_size)
    bf.generate(convs[:2], SamplingConfig(n=1, temperature=1.0, max_tokens=4))
    gens, s = timed(lambda: bf.generate(convs, sampling))
    tok = sum(c.tokens for g in gens for c in g.completions)
    print(
        f"bench generate: path=hf-bf16 prompts={len(convs)} tokens={tok} tokens_per_s={tok / s:.1f} "
        f"ratio_vs_fp32={(tok / s) / hf_rate:.2f}",
        flush=True,
    )
    bf.close()
    if args.skip_serve:
        return
    proc, url = serve(Path(args.model))
    try:
        api = make_backend("openai", args.model, base_url=url, concurrency=4)
        api.generate(convs[:1], SamplingConfig(n=1, temperature=1.0, max_tokens=4))
        gens, s = timed(lambda: api.generate(convs, sampling))
        tok = sum(c.tokens for g in gens for c in g.completions)
        print(
            f"bench generate: path=openai+transformers-serve prompts={len(convs)} tokens={tok} "
            f"tokens_per_s={tok / s:.1f} ratio_vs_hf={(tok / s) / hf_rate:.2f}",
            flush=True,
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
