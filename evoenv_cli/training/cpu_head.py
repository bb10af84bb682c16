"""TRL's fused LM head on a CPU: project only the positions the loss reads.

TRL 1.16 computes per-token log-probabilities through a chunked, fused LM head
(`trl.trainer.utils.add_fused_lm_head`; the distillation loss has the same split in
`trl.trainer.distillation_trainer`). On a device with Triton it projects only the positions
whose label is not -100: the completion. Elsewhere it projects *every* position, the prompt
included, and masks the result afterwards, because on compiled backends (its comment names
Neuron) a changing number of positions would change the tile shapes and recompile each batch.

A CPU recompiles nothing, so there the prompt's positions are projected through a 49k-word
vocabulary, in fp32 for the gradient, only to be masked out. On the starter model with the
learning bench's prompts (about 130 prompt tokens before a 24-token answer) that was most of
the backward pass: the profile of one GRPO step put 22 s of its 41 s of backward in TRL's
chunked log-prob backward. `compact_lm_head_on_cpu()` makes TRL take its own compact path on a
CPU: the same kernel, the same numbers (tests/training/test_cpu_head.py compares log-probabilities and
gradients both ways), over the positions that count. Other devices keep TRL's own choice.
"""

from __future__ import annotations

import functools
import importlib

# the modules of TRL that decide `compact = _use_triton(device)` for themselves
_DECIDERS = ("trl.trainer.utils", "trl.trainer.distillation_trainer")


def compact_lm_head_on_cpu() -> list[str]:
    """Let TRL's fused LM head score only the loss's positions on a CPU. Idempotent; returns
    the modules it changed (none when this TRL has no such decision to make)."""
    changed = []
    for name in _DECIDERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        decide = getattr(module, "_use_triton", None)
        if decide is None or getattr(decide, "evoenv_compact_on_cpu", False):
            continue
        module._use_triton = _compact_on_cpu(decide)
        changed.append(name)
    return changed


def _compact_on_cpu(decide):
    @functools.wraps(decide)
    def compact(device) -> bool:
        return decide(device) or getattr(device, "type", str(device)) == "cpu"

    compact.evoenv_compact_on_cpu = True
    return compact


__all__ = ["compact_lm_head_on_cpu"]
