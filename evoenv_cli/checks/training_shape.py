"""State over the shape of training, for `evoenv validate`: one reward worker, replacement off,
fed what GRPO feeds it (groups of completions for one instance, the reference several times
in a row; then many distinct instances; then as many calls as a worker serves before it is
replaced), with known answers scored at each point and `generate` run again at the end.

A `score` that turns lenient once it has seen a group, many instances or many calls, or a
`generate` that drifts with the calls served, pays (or builds) what validate never saw. This
module plans the phases and says what each call must give; validate runs them in the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evoenv_cli.runtime.workers import Call, CallResult

GROUP_REFERENCES = 6  # the reference this many times in a row, then the wrong answers
GROUPS = 4


@dataclass
class Phase:
    """Calls sent in order to the one worker; `expected[k]` is what call k must return (None:
    not compared, the call only builds up state). `probe` names the verdict when one differs."""

    probe: str
    label: str
    calls: list[Call] = field(default_factory=list)
    expected: list[Any] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)

    def add(self, call: Call, expected: Any = None, shown: str = "") -> None:
        self.calls.append(call)
        self.expected.append(expected)
        self.shown.append(shown)

    def first_mismatch(self, results: list[CallResult]) -> tuple[int, CallResult] | None:
        for k, (want, r) in enumerate(zip(self.expected, results)):
            if want is not None and (not r.ok or r.value != want):
                return k, r
        return None


def groups(known: list[tuple[Call, Any, str, str]]) -> Phase:
    """GRPO groups: per instance (the first GROUPS), its reference GROUP_REFERENCES times and
    then its wrong answers; `known` is (score call, value it gave, kind, answer)."""
    phase = Phase("score_grpo_group", f"after the reference came {GROUP_REFERENCES} times in a row (a GRPO group)")
    by_instance: dict[str, list[tuple[Call, Any, str, str]]] = {}
    for item in known:
        by_instance.setdefault(repr(item[0].args[0]), []).append(item)
    for items in list(by_instance.values())[:GROUPS]:
        refs = [i for i in items if i[2] == "reference"]
        if not refs:
            continue
        for _ in range(GROUP_REFERENCES):
            phase.add(refs[0][0], refs[0][1], refs[0][3])
        for call, value, kind, answer in items:
            if kind != "reference":
                phase.add(call, value, answer)
    return phase


def distinct(new_instances: list[dict], known: list[tuple[Call, Any, str, str]], garbage: str) -> Phase:
    """Many distinct instances scored (a garbage answer each), then the known answers again."""
    phase = Phase("score_many_instances", f"after scoring {len(new_instances)} distinct instances")
    for inst in new_instances:
        phase.add(Call.score(inst, garbage))
    for call, value, _, answer in known:
        phase.add(call, value, answer)
    return phase


def aged(
    known: list[tuple[Call, Any, str, str]],
    filler: list[Call],
    regenerate: list[tuple[Call, dict]],
    need: int,
    bound: int,
) -> tuple[Phase, Phase]:
    """`need` filler calls (repeats of calls that already succeeded, generates among them),
    then the known scores (`score_after_many_calls`) and the instances generated again
    (`generate_after_many_calls`)."""
    scores = Phase("score_after_many_calls", f"after the worker had served {bound} calls")
    for k in range(max(0, need)):
        scores.add(filler[k % len(filler)])
    for call, value, _, answer in known:
        scores.add(call, value, answer)
    gens = Phase("generate_after_many_calls", f"after the worker had served {bound} calls")
    for call, instance in regenerate:
        gens.add(call, instance, f"generate{call.args}")
    return scores, gens
