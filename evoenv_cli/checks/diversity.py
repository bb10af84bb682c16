"""The `diversity` check: seeds give distinct instances at every level."""

from __future__ import annotations

import json

from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import Check, register


def check_diversity(checker: Checker) -> None:
    by_pair = checker.by_pair
    shares = {}
    for d, seeds in checker.diversity_pairs.items():
        seen = [json.dumps(by_pair[(s, d)], sort_keys=True) for s in seeds]
        shares[d] = round(len(set(seen)) / len(seen), 4)
    checker.m["distinct_instance_share"] = {str(d): v for d, v in shares.items()}
    low = [d for d, v in shares.items() if v < checker.cfg.min_distinct_share]
    if low:
        d = low[0]
        raise Rejected(
            "diversity",
            f"only {shares[d]:.0%} distinct instances over "
            f"{checker.cfg.diversity_seeds} seeds at difficulty {d} "
            f"(need {checker.cfg.min_distinct_share:.0%})",
        )


register(Check("diversity", "seeds give distinct instances at every level", check_diversity, 50))
