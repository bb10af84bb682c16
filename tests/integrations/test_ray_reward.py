"""verl and OpenRLHF score in Ray worker processes. The library path reaches them only through
Ray's runtime_env (EVOENV_LIBRARY in env_vars), and each worker process builds its own
EnvReward and sandbox pool once, on its first call, then reuses it. A real local Ray cluster."""

import os

import pytest
from conftest import SEEDS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    import ray

    saved = {k: os.environ.get(k) for k in ("EVOENV_LIBRARY", "RAY_AUTH_MODE")}
    os.environ.pop("EVOENV_LIBRARY", None)  # the driver does not have it: only runtime_env carries it
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
        runtime_env={"env_vars": {"EVOENV_LIBRARY": str(SEEDS), "EVOENV_WORKERS": "10", "OMP_NUM_THREADS": "1"}},
    )
    yield ray
    ray.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_each_ray_worker_builds_its_pool_once(ray_cluster):
    from evoenv_cli.artifacts import EnvLibrary
    from evoenv_cli.config import SampleConfig
    from evoenv_cli.runtime.workers import SandboxWorkers
    from evoenv_cli.stages import sample

    ray = ray_cluster
    with SandboxWorkers() as pool:
        rows = [
            sample.to_format(r, "verl", i)
            for i, r in enumerate(sample.run(EnvLibrary.open(SEEDS), SampleConfig(per_env=1, difficulty=2), pool).rows)
        ]

    @ray.remote(num_cpus=1)
    class RewardWorker:  # what verl's reward loop workers are: long-lived Ray actors
        def score(self, row, text):
            from evoenv_cli.integrations import rewards

            out = rewards.compute_score(
                data_source=row["data_source"],
                solution_str=text,
                ground_truth=row["reward_model"]["ground_truth"],
                extra_info=row["extra_info"],
            )
            shared = rewards.shared_reward()
            return {
                "score": out["score"],
                "pid": os.getpid(),
                "reward": id(shared),
                "rewards_built": len(rewards._shared),
                "library": os.environ.get("EVOENV_LIBRARY"),
                "spawned": shared.pool.spawned,
                "sandbox": shared.pool.plan.mode,
            }

    workers = [RewardWorker.remote() for _ in range(2)]
    calls = [
        (w, row, f"<answer>{row['reward_model']['ground_truth']}</answer>")
        for _ in range(2)
        for row in rows
        for w in workers
    ]
    results = ray.get([w.score.remote(row, text) for w, row, text in calls])
    assert [r["score"] for r in results] == [1.0] * len(calls)
    by_pid: dict[int, list[dict]] = {}
    for r in results:
        by_pid.setdefault(r["pid"], []).append(r)
    assert len(by_pid) == 2 and os.getpid() not in by_pid
    for rs in by_pid.values():
        assert {r["reward"] for r in rs} == {rs[0]["reward"]}  # one EnvReward per process ...
        assert {r["rewards_built"] for r in rs} == {1}  # ... built once
        # one sandbox worker per environment, reused by the second round of calls
        assert len(rs) == 2 * len(rows) and max(r["spawned"] for r in rs) == len(rows)
        assert {r["library"] for r in rs} == {str(SEEDS)}
        assert rs[0]["sandbox"] == "bwrap"
