"""`make bench`, reward budget section: a 32-row reward batch with 8 pathological completions
(tests/integrations/test_score_budget.py's generated family: catastrophic regex backtracking, loops and
allocations sized by the answer; three of them at the head of the chunk) against a clean one of
the same environment, side by side in one run, with the score budget (now) and without it (the
pool's calls as before: each runaway score paid the full time limit and a worker)."""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_score_budget import batch, env_of, hostile_source  # noqa: E402

from evoenv_cli.integrations.rewards import EnvReward  # noqa: E402
from evoenv_cli.runtime.workers import Call, SandboxWorkers  # noqa: E402

FAMILY = range(20, 26)
REPEATS = 5


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-budget-"))
    ratios, clean_ms, hostile_ms, paid, old_s, old_paid = [], [], [], [], [], []
    for seed in FAMILY:
        rng = random.Random(seed)
        source, bad = hostile_source(rng, f"budget_{seed}")
        env = env_of(tmp, source, f"budget_{seed}")
        reward = EnvReward([env], recheck_share=0.0, workers=1, quarantine_after_timeouts=10**9)
        try:
            clean, clean_inst, _ = batch(random.Random(1), bad, n_bad=0, head=0)
            reward.details(clean, [env.env_id] * 32, clean_inst)  # worker started, budget measured
            for _ in range(REPEATS):  # alternating, so the host's load weighs on both alike
                t = time.perf_counter()
                reward.details(clean, [env.env_id] * 32, clean_inst)
                c = time.perf_counter() - t
                completions, instances, bad_at = batch(rng, bad)
                t = time.perf_counter()
                out = reward.details(completions, [env.env_id] * 32, instances)
                h = time.perf_counter() - t
                clean_ms.append(c * 1000)
                hostile_ms.append(h * 1000)
                ratios.append(h / c)
                paid.append(sum(d["score"] == 1.0 for k, d in enumerate(out) if k not in bad_at))
        finally:
            reward.close()
        if seed == FAMILY[0]:  # before: one batch, unbudgeted (it costs seconds)
            answers = [c[len("<answer>") : -len("</answer>")] for c in completions]
            calls = [Call.score(json.loads(i), a) for i, a in zip(instances, answers)]
            with SandboxWorkers(workers=1) as pool:
                pool.describe(env)
                t = time.perf_counter()
                results = pool.run(env, calls)
                old_s.append(time.perf_counter() - t)
            old_paid.append(sum(r.ok and r.value == 1.0 for r in results))
    print(
        f"bench reward budget: 32-row batch, 8 pathological completions (3 at the head), "
        f"{len(FAMILY)} generated environments x {REPEATS}; clean median {statistics.median(clean_ms):.1f} ms, "
        f"with the pathological median {statistics.median(hostile_ms):.1f} ms "
        f"(x{statistics.median(ratios):.1f} of clean, max x{max(ratios):.1f}); correct answers paid "
        f"{min(paid)}/24 at worst; before (no budget, one batch): {old_s[0]:.1f} s, {old_paid[0]}/24 paid"
    )


if __name__ == "__main__":
    main()
