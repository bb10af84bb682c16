"""A stand-in for `evoenv train` in the loop's kill tests (iterate.train_launch runs it): it
reads the rows and writes the manifest the loop reads, with no model to train. The real train
stage runs in tests/test_train.py and in test_iterate.py's loop.

    python tests/scripted_train.py -m evoenv_cli train DATA --library POOL --model M --out OUT ...
"""

import json
import sys
from pathlib import Path

args = sys.argv[1:]
data = Path(args[3])
out = Path(args[args.index("--out") + 1])
rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
out.mkdir(parents=True, exist_ok=True)
print(f"scripted train: {len(rows)} rows", flush=True)
(out / "train-manifest.json").write_text(
    json.dumps(
        {
            "summary": {
                "stage": "train",
                "steps": 1,
                "rows": len(rows),
                "mean_reward": 0.0,
                "all_groups_zero_variance": True,
            },
            "timings": {"load_s": 0.0, "sandbox_calls": 0},
        }
    )
)
