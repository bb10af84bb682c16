"""`make bench`, score section: the seeds' real `score` calls, measured side by side in one run
through the sandboxed pool (batched), in-process without a sandbox, and with a fresh
`python -c` subprocess per call (the human-eval style baseline).

Then the reward path (`score_queries`, OpenRLHF's reward call, and `serve-reward` over HTTP) on
256-item batches with the default 2% re-check share, before and after re-checks were drawn by
environment chunk: before, each re-checked item started a worker of its own (`PerItemAudit`
below keeps that for the comparison); after, each picked environment chunk of a request is
re-checked in one fresh worker. The batches alternate between the two, so load on the machine
weighs on both alike."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from evoenv_cli.artifacts import EnvLibrary
from evoenv_cli.integrations.reward_audit import RewardAudit
from evoenv_cli.integrations.rewards import EnvReward, score_queries
from evoenv_cli.runtime.workers import Call, Limits, SandboxWorkers

ROOT = Path(__file__).resolve().parents[1]
PER_ENV = 2000
SUBPROCESS_CALLS = 40
BATCH, BATCHES, RECHECK_SHARE = 256, 16, 0.02


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

    with SandboxWorkers(workers=2) as pool:
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
    reward_path(lib, modules)


class PerItemAudit(RewardAudit):
    """The re-checks as they were: each scored item picked on its own (probability `share`)
    and scored again in a worker started for that one call."""

    def __init__(self, share: float, **kwargs):
        super().__init__(share, **kwargs)
        self.limits = dataclasses.replace(self.limits, max_calls_per_worker=1)

    def sample(self, items):
        return [items[k] for k in self.pick(len(items))]

    def recheck(self, items):
        added = []
        for env, instance, answer, paid in items:
            if env.env_id not in self.quarantined:
                record = self._judge(env, instance, answer, paid, self.pool.run(env, [Call.score(instance, answer)])[0])
                added += [record] if record is not None else []
        return added


def reward_batches(lib: EnvLibrary, modules: dict) -> list[tuple[list[str], list[str], list[str]]]:
    """BATCHES requests of BATCH (query, prompt, label) over all seeds, half the answers right."""
    batches = []
    for b in range(BATCHES):
        queries, prompts, labels = [], [], []
        for k in range(BATCH):
            env = lib.files[(b * BATCH + k) % len(lib.files)]
            module = modules[env.env_id]
            instance = json.loads(json.dumps(module.generate(b * BATCH + k, 1 + k % 10)))
            answer = module.solve(instance) if k % 2 == 0 else "0"
            prompt = f"Task {b}-{k}: {module.prompt(instance)[:200]}"
            label = {"env_id": env.env_id, "env_name": env.name, "instance": instance, "answer": module.solve(instance)}
            queries.append(f"{prompt} Thinking... <answer>{answer}</answer>")
            prompts.append(prompt)
            labels.append(json.dumps(label))
        batches.append((queries, prompts, labels))
    return batches


def _post(url: str, batch) -> None:
    body = json.dumps({"query": batch[0], "prompts": batch[1], "labels": batch[2]}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        assert len(json.loads(response.read())["rewards"]) == BATCH


def reward_path(lib: EnvLibrary, modules: dict) -> None:
    from evoenv_cli.integrations.reward_server import RewardServer

    batches = reward_batches(lib, modules)
    rewards = {
        "before": EnvReward(lib.files, recheck_share=RECHECK_SHARE),
        "after": EnvReward(lib.files, recheck_share=RECHECK_SHARE),
    }
    before = rewards["before"]
    before.audit = PerItemAudit(RECHECK_SHARE, sandbox=before.pool.plan.mode, limits=Limits())
    servers = {}
    try:
        for reward in rewards.values():
            for env in lib.files:  # start and import outside the timing, as a long run would
                reward.pool.describe(env)
        seconds = {name: {"score_queries": 0.0, "serve-reward": 0.0} for name in rewards}
        for batch in batches:
            for name, reward in rewards.items():
                t = time.perf_counter()
                score_queries(*batch, reward=reward)
                seconds[name]["score_queries"] += time.perf_counter() - t
        scored = {name: (r.audit.checked, r.stats["scored"]) for name, r in rewards.items()}
        for name, reward in rewards.items():
            servers[name] = RewardServer(("127.0.0.1", 0), reward, log=lambda message: None)
            threading.Thread(target=servers[name].serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        for batch in batches:
            for name, server in servers.items():
                t = time.perf_counter()
                _post(server.url, batch)
                seconds[name]["serve-reward"] += time.perf_counter() - t
        items = BATCH * BATCHES
        rates = {name: {k: items / v for k, v in s.items()} for name, s in seconds.items()}
        share = {name: f"{checked}/{n}={checked / max(n, 1):.1%}" for name, (checked, n) in scored.items()}
        spawned = {name: r.audit.pool.spawned for name, r in rewards.items()}
        print(
            f"bench reward: {BATCHES} batches of {BATCH}, recheck_share={RECHECK_SHARE}, 1 client; "
            f"score_queries before={rates['before']['score_queries']:.0f}/s after={rates['after']['score_queries']:.0f}/s "
            f"(x{rates['after']['score_queries'] / rates['before']['score_queries']:.2f}); "
            f"serve-reward before={rates['before']['serve-reward']:.0f}/s after={rates['after']['serve-reward']:.0f}/s "
            f"(x{rates['after']['serve-reward'] / rates['before']['serve-reward']:.2f}); "
            f"re-checked in score_queries before={share['before']} after={share['after']}; "
            f"re-check workers started (both parts) before={spawned['before']} after={spawned['after']}"
        )
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
        for reward in rewards.values():
            reward.close()


if __name__ == "__main__":
    main()
