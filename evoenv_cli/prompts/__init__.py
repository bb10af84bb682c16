"""The texts evoenv shows a model (synthesis, review, the arena's judge) and the environment
contract as the model reads it, rendered from runtime/contract.py. Every stage that writes a
prompt reads its template here."""

from __future__ import annotations

import string
import textwrap
from pathlib import Path

from evoenv_cli.runtime import contract

PROMPTS = Path(__file__).resolve().parent


def template(name: str) -> str:
    return (PROMPTS / name).read_text(encoding="utf-8")


def _words(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]


def contract_text() -> str:
    """The environment contract as the policy reads it: prompts/contract.txt with every list
    and limit filled in from runtime/contract.py, so the prompt cannot drift from the checker."""

    def listed(names):
        return ", ".join(sorted(names, key=lambda n: (n.lstrip("_").lower(), n)))

    text = (
        string.Template(template("contract.txt"))
        .substitute(
            allowed_imports=", ".join(sorted(contract.ALLOWED_IMPORTS - {"__future__"})),
            forbidden_names=listed(contract.FORBIDDEN_NAMES),
            forbidden_attributes=listed(contract.FORBIDDEN_ATTRIBUTES),
            underscore_ok=_words(sorted(contract.ALLOWED_UNDERSCORE_ATTRIBUTES)),
            answer_types=", ".join(contract.ANSWER_TYPES),
            lowest=contract.LEVELS[0],
            highest=contract.LEVELS[-1],
            call_seconds=f"{contract.ASKED_CALL_SECONDS:g}",
            import_seconds=f"{contract.MAX_IMPORT_SECONDS:g}",
            instance_kb=contract.ASKED_INSTANCE_BYTES // 1000,
        )
        .strip()
    )
    first, rest = text.split("\n\n", 1)
    return textwrap.fill(" ".join(first.split()), 95, break_on_hyphens=False) + "\n\n" + rest
