"""The `leak` check: the prompt does not give the answer away, written as is or in a simple
encoding, nor to a prompt-only solver (checks/leak_solvers.py) that reads it as a policy would.
"""

from __future__ import annotations

from collections.abc import Callable

from evoenv_cli.checks import leak_learners, leak_solvers, probes
from evoenv_cli.checks.context import CONFIRM_INSTANCES, MAX_CONFIRM_INSTANCES, Checker, Rejected
from evoenv_cli.checks.probes import whole_token_in
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.runtime.contract import import_grant

Measure = Callable[[list[str], list[str]], list[leak_solvers.SolverRate]]  # (prompts, references) -> rates
LEAK_FORMS = {
    "plain": "",
    "reversed": " backwards",
    "reversed_items": " with its items reversed",
    "base64": " in base64",
    "hex": " in hex",
    "spelled_out": " with its digits spelled out",
}


def form_rates(texts: list[str], references: list[str]) -> list[leak_solvers.SolverRate]:
    """The reference written in the prompt as is (`plain`) or in one of LEAK_FORMS' encodings:
    per form, the share of the instances that write it so, and its chance rate, how often another
    instance's reference (among the next five that differ) is so written in this prompt."""
    n = len(texts)
    refs = [r.strip() for r in references]
    others = [(k, j) for k in range(n) for j in range(k + 1, min(n, k + 6)) if refs[j] != refs[k]]
    encoded = [probes.encodings(r) for r in refs]
    out = []
    for kind in LEAK_FORMS:
        if kind == "plain":
            hits = [whole_token_in(refs[k], texts[k]) for k in range(n)]
            base = [whole_token_in(refs[j], texts[k]) for k, j in others]
        else:
            hits = [probes.encoded_in(kind, encoded[k][kind], texts[k]) for k in range(n) if kind in encoded[k]]
            base = [probes.encoded_in(kind, encoded[j][kind], texts[k]) for k, j in others if kind in encoded[j]]
        if hits:
            out.append(
                leak_solvers.SolverRate(kind, sum(hits) / n, sum(base) / len(base) if base else 0.0, n, len(base))
            )
    return out


def check_leak(checker: Checker) -> None:
    """The reference written in most prompts, as is or in a simple encoding (reversed,
    base64, hex, digits spelled out), and more often than other instances' references are
    so written: an answer that is one of the prompt's own labels (a SELECT composite's "B")
    appears in every prompt but tells the solver nothing. The limits are tested like the
    solvers': a form possibly over them on the first instances is measured on more, and only
    one surely over them there (or over them on MAX_CONFIRM_INSTANCES) rejects, so a share
    the draw put just over the limit is not a verdict (the knapsack seed at levels 1-5, where
    its answer is often an item's value: 34% of instances, 53% on one draw of 36)."""
    insts = checker.insts
    limits = (checker.cfg.max_leak_share, checker.cfg.min_leak_excess)
    forms = form_rates([i.text for i in insts], [i.reference for i in insts])
    shares = {r.name: r.share for r in forms}
    checker.m["leak_share"] = round(shares["plain"], 4)
    checker.m["leak_baseline_share"] = round(next(r.baseline for r in forms if r.name == "plain"), 4)
    checker.m["leak_share_by_encoding"] = {k: round(v, 4) for k, v in shares.items() if k != "plain"}
    if any(r.over(*limits) for r in forms):
        forms = _confirm_leak(checker, [r.name for r in forms if r.over(*limits)], form_rates, "leak_share_confirmed")
    for r in forms:
        if r.over(*limits):
            raise Rejected(
                "leak",
                f"the reference answer is written{LEAK_FORMS[r.name]} in the prompt in {r.share:.0%} "
                f"of {r.n} instances (at most {checker.cfg.max_leak_share:.0%} allowed), against "
                f"{r.baseline:.0%} for other instances' answers",
                f"leak_{r.name}",
            )
    solved = leak_solvers.rates([i.text for i in insts], [i.reference for i in insts])
    checker.m["leak_solver_share"] = {r.name: [round(r.share, 4), round(r.baseline, 4)] for r in solved}
    if import_grant(checker.env.source) is not None:
        # a task evoenv's own import template made from an external benchmark (its content
        # decides, not a declaration): arithmetic on the prompt's numbers is the task itself
        # there (chain_sum, basic_arithmetic), not a leak; the other solvers still read it
        solved = [r for r in solved if r.name not in leak_solvers.TASK_SOLVERS]
    if any(r.over(*limits) for r in solved):
        solved = _confirm_leak(checker, [r.name for r in solved], leak_solvers.rates, "leak_solver_share_confirmed")
    for r in solved:
        if r.over(*limits):
            raise Rejected(
                "leak",
                f"the prompt-only solver {r.name} finds the answer from the prompt alone on "
                f"{r.share:.0%} of instances (at most {checker.cfg.max_leak_share:.0%} allowed), against "
                f"a chance rate of {r.baseline:.0%} (other instances' answers)",
                f"leak_solver_{r.name}",
            )
    check_learners(checker)


def check_learners(checker: Checker) -> None:
    """The prompt-only learners (checks/leak_learners.py), fitted on the first instances and
    tested on held-out ones: the few features whose share beats their chance rate by
    half `min_learner_excess` on the first instances are measured on CONFIRM_INSTANCES more; surely
    over the limit (one-sided 95%, split among them) one rejects, naming its feature; all surely
    under, the file passes; still in between, they are measured on MAX_CONFIRM_INSTANCES and one
    over the limit there rejects. Good files pay the fit alone (string work on the first
    instances); the more instances are the ones the solvers and the constant answer share."""
    min_excess = checker.cfg.min_learner_excess
    if min_excess >= 1:
        return
    insts = checker.insts
    fitted = leak_learners.rates([i.text for i in insts], [i.reference for i in insts])
    checker.m["leak_learner_fit"] = [[r.name, round(r.share, 4), round(r.baseline, 4)] for r in fitted[:3]]
    # a lenient screen (half the limit): 36 instances are few, and a leak just over the limit
    # must not slip past on an unlucky draw (a positional prior of 46% against 1/6 fitted at
    # 33% on one); the held-out test decides
    screen = min_excess * leak_learners.SCREEN_SHARE
    suspects = [r.name for r in fitted[: leak_learners.TESTED] if r.share - r.baseline > screen]
    if not suspects:
        return
    z = leak_learners.LEARNER_Z
    tested = _learners_held_out(checker, suspects, CONFIRM_INSTANCES)
    sure = [r for r in tested if r.surely_over(0.0, min_excess, z)]
    unsure = [
        r.name for r in tested if not r.surely_over(0.0, min_excess, z) and not r.surely_under(0.0, min_excess, z)
    ]
    if unsure and not sure:
        sure = [r for r in _learners_held_out(checker, unsure, MAX_CONFIRM_INSTANCES) if r.over(0.0, min_excess, z)]
    if sure:
        r = sure[0]
        raise Rejected(
            "leak",
            f"a prompt-only learner, feature {r.name}, fitted on {len(insts)} instances, finds the "
            f"answer from the prompt alone on {r.share:.0%} of {r.n} held-out instances, against a "
            f"chance rate of {r.baseline:.0%} for an answer of its shape (at most "
            f"{min_excess:.0%} over it allowed, validate.min_learner_excess)",
            f"learner_{r.name}",
        )


def _learners_held_out(checker: Checker, names: list[str], n: int) -> list[leak_solvers.SolverRate]:
    """The learners `names` on `n` instances the fit did not see, largest excess first."""
    made = checker.more_instances(n)
    checker.within_budget()
    tested = leak_learners.rates([m.task for m in made], [m.answer for m in made], names)
    checker.m["leak_learner_held_out"] = [[r.name, round(r.share, 4), round(r.baseline, 4), r.n] for r in tested]
    return tested


def _confirm_leak(checker: Checker, names: list[str], measure: Measure, label: str) -> list[leak_solvers.SolverRate]:
    """Measures (solvers, or the written forms) over the limits on the first instances,
    measured again on CONFIRM_INSTANCES more: whether a borderline file is admitted must not
    depend on which instances its hash drew (the knapsack seed was rejected on 18 of 60 draws).
    One surely over the limits (95%) is kept, one surely under is dropped, and one still in
    between is measured on MAX_CONFIRM_INSTANCES and kept when it is over them there. Returns
    the kept rates, in `measure`'s order."""
    limits = (checker.cfg.max_leak_share, checker.cfg.min_leak_excess)
    solved = _rates_with_more(checker, names, CONFIRM_INSTANCES, measure, label)
    unsure = [r.name for r in solved if r.over(*limits) and not r.surely_over(*limits) and not r.surely_under(*limits)]
    kept = [r for r in solved if r.surely_over(*limits)]
    if unsure and not kept:
        kept = [r for r in _rates_with_more(checker, unsure, MAX_CONFIRM_INSTANCES, measure, label) if r.over(*limits)]
    return kept


def _rates_with_more(
    checker: Checker, names: list[str], n: int, measure: Measure, label: str
) -> list[leak_solvers.SolverRate]:
    made = checker.more_instances(n)
    texts = [i.text for i in checker.insts] + [m.task for m in made]
    refs = [i.reference for i in checker.insts] + [m.answer for m in made]
    solved = [r for r in measure(texts, refs) if r.name in names]
    checker.m["leak_confirm_instances"] = len(texts)
    checker.m[label] = {r.name: [round(r.share, 4), round(r.baseline, 4)] for r in solved}
    return solved


register(Check("leak", "the prompt does not give the answer away, as is or encoded", check_leak, 90))
