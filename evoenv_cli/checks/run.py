"""The `run` check: every call at every level, on the instances the later checks read
(`checker.insts`), made at training's seeds and `sample`'s.
"""

from __future__ import annotations

from evoenv_cli.checks.context import Checker, Instance, Rejected, failed, reject_failed, sample_pairs, training_seeds
from evoenv_cli.checks.probes import Context
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.runtime.instances import ASKED, Order
from evoenv_cli.runtime.workers import Call


def check_run(checker: Checker) -> None:
    """Every call on every (seed, level); values are checked by the pool."""
    cfg = checker.cfg
    env_id = checker.env.env_id
    pairs = [(s, d) for d in cfg.levels for s in training_seeds(env_id, f"level:{d}", cfg.seeds_per_level)]
    checker.sampled = {p for p in sample_pairs(env_id, checker.name, cfg) if p not in pairs}
    pairs += sorted(checker.sampled)
    checker.diversity_pairs = {
        d: training_seeds(env_id, f"diversity:{d}", cfg.diversity_seeds) for d in cfg.diversity_levels
    }
    planned = set(pairs)
    extra = [(s, d) for d, seeds in checker.diversity_pairs.items() for s in seeds if (s, d) not in planned]
    made, extra_made = checker.make([Order(checker.env, pairs), Order(checker.env, extra, ask=())])
    for m in made + extra_made:
        reject_failed("run", m, ("generate",))
    by_pair = {(m.seed, m.difficulty): m.instance for m in made + extra_made}
    insts = [Instance(m.seed, m.difficulty, m.instance) for m in made]
    for m, inst in zip(made, insts):
        reject_failed("run", m, ASKED)
        for fn in ASKED:
            checker.times.setdefault((fn, inst.difficulty), []).append(m.results[fn].seconds)
        inst.text, inst.reference = m.task, m.answer
        inst.context = Context.of(inst.instance, inst.text, inst.reference)
        if not inst.text.strip():
            raise Rejected("run", f"prompt is empty at seed {inst.seed} difficulty {inst.difficulty}")
    ref_calls = [Call.score(i.instance, i.reference) for i in insts]
    ref_scores = checker.call(ref_calls)
    for c, r, inst in zip(ref_calls, ref_scores, insts):
        if not r.ok:
            raise failed("run", c.fn, r, inst.seed, inst.difficulty)
        checker.times.setdefault(("score", inst.difficulty), []).append(r.seconds)
    checker.m["instances"] = len(insts)
    checker.insts, checker.ref_scores, checker.by_pair = insts, ref_scores, by_pair


register(Check("run", "every call at every level returns a value of the contract's type", check_run, 30))
