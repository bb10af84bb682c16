"""test_cluster_train.py's child: the loop's train step alone (its record run by `loop.wired`, as
`evoenv iterate` runs it after sample) on a run whose round 1 is done up to sample, with the
recipe's `iterate.cluster: ray`. Exit 0: trained; 1: the loop's StageFailed (its line on stderr).

Usage: python cluster_train_child.py RUN RECIPE MODEL SEEDS"""

import sys
from pathlib import Path

from evoenv_cli import config as cfgmod
from evoenv_cli import stage, stages
from evoenv_cli.loop import Loop, RoundBook, StageFailed, wired

run, recipe, model, seeds = map(Path, sys.argv[1:5])
loop = Loop(run, recipe, str(model), cfgmod.load_recipe(recipe).iterate, seeds)
loop.check_train()
d = run / stage.round_name(1)
sample = stages.get("sample")
rnd = stage.Round(1, d, str(model), loop.spec, loop.cfg, seeds, loop.env_pool, print, recipe_file=recipe)
rnd.add(stage.result_in(sample, sample.out_in(d)))
try:
    wired(loop, stages.get("train"), rnd, RoundBook.open(d, "round 1"))
except StageFailed as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(1)
