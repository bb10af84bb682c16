"""test_cluster_train.py's child: the loop's train step alone (`Loop.train`, what `evoenv
iterate` runs after sample) on a run whose round 1 is done up to sample, with the recipe's
`iterate.cluster: ray`. Exit 0: trained; 1: the loop's StageFailed (its line on stderr).

Usage: python cluster_train_child.py RUN RECIPE MODEL SEEDS"""

import sys
from pathlib import Path

from evoenv_cli import config as cfgmod
from evoenv_cli import stages
from evoenv_cli.loop import Loop, StageFailed

run, recipe, model, seeds = map(Path, sys.argv[1:5])
loop = Loop(run, recipe, str(model), cfgmod.load_recipe(recipe).iterate, seeds)
loop.check_train()
d = run / "round-01"
try:
    loop.train(d / "sample" / stages.get("sample").marker, d / "train", str(model))
except StageFailed as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(1)
