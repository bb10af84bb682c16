"""`make bench`, score section: the seeds' real `score` calls, measured side by side in one run
through the sandboxed pool (batched), in-process without a sandbox, and with a fresh
`python -c` subprocess per call (the human-eval style baseline)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.runtime.pool import Call, SandboxPool

ROOT = Path(__file__).resolve().parents[1]
PER_ENV = 2000
SUBPROCESS_CALLS = 40


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def realistic_calls(module) -> list[tuple[dict, str]]:
    """Instances over difficulties 1..10; half the answers right, half another instance's."""
    instances = [json.loads(json.dumps(module.generate(s, 1 + s % 10))) for s in range(50)]
    refs = [module.solve(i) for i in instances]
    calls = []
    for k in range(PER_ENV):
        inst = instances[k % 50]
        answer = refs[k % 50] if k % 2 == 0 else refs[(k + 7) % 50]
        calls.append((inst, answer))
    return calls


def main() -> None:
    lib = EnvLibrary.open(ROOT / "seeds")
    modules = {env.env_id: load(env.path) for env in lib.files}
    work = {env.env_id: realistic_calls(modules[env.env_id]) for env in lib.files}
    total = sum(len(v) for v in work.values())

    t = time.perf_counter()
    for env in lib.files:
        score = modules[env.env_id].score
        for inst, answer in work[env.env_id]:
            score(inst, answer)
    inprocess = total / (time.perf_counter() - t)

    with SandboxPool(workers=2) as pool:
        for env in lib.files:  # start and import outside the timing, as a long run would
            pool.describe(env)
        jobs = [(env, [Call.score(i, a) for i, a in work[env.env_id]]) for env in lib.files]
        t = time.perf_counter()
        results = pool.run_many(jobs)
        pool_rate = total / (time.perf_counter() - t)
        mode = pool.plan.mode
    failed = sum(not r.ok for rs in results for r in rs)

    script = (
        "import importlib.util,json,sys\n"
        "spec=importlib.util.spec_from_file_location('e',sys.argv[1]);m=importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(m);a=json.loads(sys.argv[2]);print(m.score(a[0],a[1]))"
    )
    t = time.perf_counter()
    n = 0
    for k in range(SUBPROCESS_CALLS):
        env = lib.files[k % len(lib.files)]
        inst, answer = work[env.env_id][k]
        subprocess.run(
            [sys.executable, "-c", script, str(env.path), json.dumps([inst, answer])], capture_output=True, check=True
        )
        n += 1
    sub_rate = n / (time.perf_counter() - t)

    print(f"score calls: {total} over {len(lib.files)} seeds, sandbox={mode}, failed in pool={failed}")
    print(
        f"bench score: pool={pool_rate:.0f}/s inprocess={inprocess:.0f}/s subprocess={sub_rate:.1f}/s "
        f"ratio_inprocess={pool_rate / inprocess:.2f} ratio_subprocess={pool_rate / sub_rate:.0f}"
    )


if __name__ == "__main__":
    main()
