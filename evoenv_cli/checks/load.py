"""The `load` check: the file imports in a worker, within the import budget."""

from __future__ import annotations

from evoenv_cli.checks.context import Checker, Rejected
from evoenv_cli.checks.registry import Check, register
from evoenv_cli.runtime.workers import EnvLoadError, import_timed_out


def check_load(checker: Checker) -> None:
    """The import, and what it costs (a replaced worker pays it again)."""
    cfg = checker.cfg
    try:
        meta = checker.workers.describe(checker.env)
    except EnvLoadError as exc:
        raise load_rejected(exc) from None
    checker.answer_type = meta.get("ANSWER_TYPE")
    checker.tags = meta.get("TAGS")
    checker.name = meta.get("NAME") or checker.env.name  # what `sample` derives seeds from
    checker.m["import_seconds"] = round(meta.get("import_seconds", 0.0), 4)
    checker.output_chars += meta.get("import_output_chars", 0)
    if checker.m["import_seconds"] > cfg.max_import_seconds:
        raise Rejected(
            "load",
            f"importing the file takes {checker.m['import_seconds']:.2f} s (at most "
            f"{cfg.max_import_seconds} s); every new worker pays it again",
            "import_budget",
        )


def load_rejected(exc: EnvLoadError) -> Rejected:
    """The verdict on a file a worker could not load. An import stopped at the time limit is
    the import budget's, as a slow import measured under the limit is: which of the two a file
    meets depends on how busy the machine is, not on the file."""
    if import_timed_out(str(exc)):
        return Rejected("load", f"{exc}; every new worker pays it again", "import_budget")
    return Rejected("load", str(exc))


register(Check("load", "the file imports within the import budget, and its NAME is not taken", check_load, 20))
