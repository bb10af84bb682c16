"""The loop in a process of its own, for kill tests: a scripted policy plays every LLM role, and
`--kill-at N` sends this process SIGKILL just before its Nth change to the file system (a
rename, a replace, a folder removal or a JSONL append), `--kill-in-swap` just after the pool
is moved aside in a swap (the moment that used to lose the pool). Prints, as JSON on stdout
when it finishes, how many changes it made and each step's span of them ("round/stage":
[first, last]; train's counts this process's only: its child, a process of its own, is
killed by tests/support/scripted_train.py).

    python tests/support/loop_child.py RUN RECIPE SEEDS ROUNDS [--kill-at N | --kill-in-swap K]
"""

import hashlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evoenv_cli import artifacts  # noqa: E402
from evoenv_cli import loop as iterate  # noqa: E402
from evoenv_cli.llm.base import BaseBackend, Completion, Generation  # noqa: E402


class ScriptedPolicy(BaseBackend):
    """Answers that depend only on the prompt and the completion's seed (never on how the
    work was split or resumed); as a solver it gives no answer, so calibration admits
    uncalibrated and composites join the pool."""

    name = "scripted"

    def __init__(self, model: str):
        self.model = model

    def generate(self, prompts, sampling, *, prompt_ids=None):
        ids = self._check(prompts, sampling, prompt_ids)
        out = []
        for conv, pid in zip(prompts, ids):
            completions = []
            for j in range(sampling.n):
                h = hashlib.sha256(f"{conv[-1]['content']}|{pid}|{j}".encode()).digest()[0]
                text = f"I am not sure ({h})."
                completions.append(Completion(text, 4, "stop"))
                self.generated_tokens += 4
            out.append(Generation(completions, 10))
        return out


def main() -> None:
    run_dir, recipe, seeds, rounds = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    kill_at = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--kill-at" else None
    kill_in_swap = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--kill-in-swap" else None
    count = {"changes": 0, "swaps": 0, "steps": {}}

    def counted(fn):
        def wrapper(*args, **kwargs):
            count["changes"] += 1
            if count["changes"] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            result = fn(*args, **kwargs)
            src = Path(args[0]) if args and isinstance(args[0], (str, os.PathLike)) else None
            if fn is real_rename and src is not None and src.name == "pool" and src.parent == run_dir:
                count["swaps"] += 1
                if count["swaps"] == kill_in_swap:
                    os.kill(os.getpid(), signal.SIGKILL)
            return result

        return wrapper

    real_rename = os.rename
    os.rename = counted(os.rename)
    os.replace = counted(os.replace)
    shutil.rmtree = counted(shutil.rmtree)
    artifacts.JsonlAppender.append = counted(artifacts.JsonlAppender.append)

    def spanned(fn, name_of):
        def wrapper(self, *args, **kwargs):
            first = count["changes"] + 1
            result = fn(self, *args, **kwargs)
            count["steps"][f"{self.round}/{name_of(args, kwargs)}"] = [first, count["changes"]]
            return result

        return wrapper

    iterate.Loop.step = spanned(iterate.Loop.step, lambda a, k: k.get("label") or a[0])
    recipe_cfg = iterate.cfgmod.load_recipe(recipe)
    loop = iterate.Loop(
        run_dir,
        recipe,
        "scripted-policy",
        recipe_cfg.iterate,
        seeds,
        log=lambda m: print(m, file=sys.stderr),
        backend_factory=ScriptedPolicy,
    )
    iterate.run(loop, rounds)
    print(json.dumps(count))


if __name__ == "__main__":
    main()
