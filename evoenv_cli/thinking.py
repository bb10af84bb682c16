"""The thinking rule, in one place: which part of a model's response is its final part, and so
may hold its answer. Every reward entry point and every stage that reads a response (calibrate,
evaluate, review, synthesize, the arena's judge) asks here, so a thought is never scored as an
answer in one place and refused in another.

- The final part is the text after the last `</think>`.
- A `<think>` that never closes leaves no final part: the reasoning did not end. That holds
  when the `<think>` is in the response, and when the chat template opened it in the prompt
  (Qwen3-Thinking's template ends the prompt with `<think>`, so the response holds only the
  closing tag, and a response cut by the token limit holds no tag at all).
- A response cut at the length limit keeps only what it finished: an answer block it closed
  before the cut (see `rewards.extract_answer`), never an unfinished one. When the template is
  not known (a server's), a cut response with no `</think>` has no final part: whether the cut
  fell in a thought or after an answer cannot be told.

Truncation is read from what the generator says: a finish reason of "length" from a backend,
or, in TRL's reward functions, `completion_ids` whose last id is not an end token (the test
TRL's own `mask_truncated_completions` uses).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_PROBE = [{"role": "user", "content": "evoenv-probe"}]


def final_text(text: str | None, *, opened: bool = False) -> str | None:
    """What a response says after its reasoning: the text after the last `</think>`; None when
    a `<think>` never closes (in the response, or opened by the template when `opened`); the
    whole text when the model does not think (no tags, nothing opened)."""
    text = text or ""
    closes = list(THINK_CLOSE.finditer(text))
    if closes:  # a <think> opened again after the last close has not ended either
        tail = text[closes[-1].end() :]
        return None if THINK_OPEN.search(tail) else tail
    if opened or THINK_OPEN.search(text):
        return None
    return text


def answer_part(text: str | None, *, opened: bool | None = False, truncated: bool = False) -> str | None:
    """The part of a response that may hold its answer (`final_text`), or None. `opened` None
    means the chat template is not known (a server's): then a response cut at the length limit
    (`truncated`) before any `</think>` has none, since a cut thought and a cut answer look the
    same; a known template decides by itself."""
    text = text or ""
    if opened is None and truncated and not THINK_CLOSE.search(text):
        return None
    return final_text(text, opened=bool(opened))


def strip_thinking(text: str | None, *, opened: bool | None = False, truncated: bool = False) -> str:
    """A response without its reasoning (what a stage should parse); "" when it has no final
    part (see `answer_part`)."""
    return answer_part(text, opened=opened, truncated=truncated) or ""


def template_opens_think(tokenizer: Any, chat_template_kwargs: dict | None = None) -> bool:
    """Whether the tokenizer's chat template leaves a `<think>` open at the end of the prompt
    (the generation prompt starts the model's reasoning for it). False when it cannot render."""
    try:
        prompt = tokenizer.apply_chat_template(
            _PROBE, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
    except Exception:  # no template, or one that needs arguments we do not have
        return False
    if not isinstance(prompt, str):
        return False
    opens = list(THINK_OPEN.finditer(prompt))
    return bool(opens) and not THINK_CLOSE.search(prompt, opens[-1].end())


def cut_at_length(completion_ids: Sequence[Any] | None, end_ids: Collection[int]) -> bool:
    """Whether a completion's token ids stop without an end token: the generator ran out of
    tokens (TRL's test for truncation: the last id is neither an EOS nor the pad token)."""
    if completion_ids is None:
        return False
    ids = list(completion_ids)
    if not ids:
        return False
    last = ids[-1]
    last = int(last.item()) if hasattr(last, "item") else int(last)
    return last not in end_ids


__all__ = [
    "THINK_CLOSE",
    "THINK_OPEN",
    "answer_part",
    "cut_at_length",
    "final_text",
    "strip_thinking",
    "template_opens_think",
]
