"""The environments' reward mixed into on-policy distillation (`distill.reward_weight`).

TRL's DistillationTrainer samples completions from the student and trains it on the generalized
JSD to the teacher over them; its loss has no reward term. With `distill.reward_weight` w > 0,
`evoenv distill` adds one, in a subclass that changes only two of TRL's steps:

- after TRL generates, each completion is scored by its environment's own `score`, in the
  sandbox, exactly as `train` pays GRPO (the recipe's answer tag and format weight), and its
  advantage is its reward less the mean reward of the whole generation batch (all ranks);
- the loss is TRL's divergence plus w times the REINFORCE term over the same completions:
  -sum_i A_i sum_t log pi(y_it) / (the completion tokens TRL's divergence is normalised by).

The student's log-probabilities come from the backbone pass TRL already runs for the
divergence (no second forward): the subclass keeps the student's hidden states of the
completion when TRL computes them and projects them through the student's LM head. A model
whose logits are scaled or soft-capped after the head is refused, as this projection would not
be its policy. The completions are TRL's samples at distill.temperature, and the log-probs are
taken at the same temperature, so the term is on-policy.
"""

from __future__ import annotations

from typing import Any

# the config attributes that put a scale or cap between the LM head and the logits (TRL reads
# the same names in its distillation loss); this term projects through the head alone
_LOGIT_TRANSFORMS = (
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
    "final_logit_softcapping",
)


def reinforce_loss(logps, mask, advantages, normalizer):
    """-sum_i A_i sum_t mask_it logp_it / normalizer: the policy-gradient term on (B, T) token
    log-probs, B advantages, normalised by the token count the divergence uses."""
    return -(advantages.unsqueeze(1) * logps * mask).sum() / normalizer


def logit_transforms(config) -> list[str]:
    """The attributes of a model's text config that scale or cap its logits after the head."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return [a for a in _LOGIT_TRANSFORMS if getattr(text, a, None) not in (None, 1.0)]


def trainer_class():
    """TRL's DistillationTrainer with the reward mixed in (imported here: TRL is heavy)."""
    import torch
    from trl import DistillationTrainer
    from trl.trainer.utils import selective_log_softmax

    class RewardMixedDistillation(DistillationTrainer):
        def __init__(self, *args, env_reward, reward_weight: float, **kwargs):
            super().__init__(*args, **kwargs)
            self.env_reward, self.reward_weight = env_reward, reward_weight
            self._capturing: Any = None
            self._student_hidden = None

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            ids, mask = out["completion_ids"], out["completion_mask"]
            kept = [row[m.bool()].tolist() for row, m in zip(ids, mask)]
            texts = self.processing_class.batch_decode(kept, skip_special_tokens=True)
            details = self.env_reward.details(
                texts,
                [x["env_id"] for x in inputs],
                [x["instance"] for x in inputs],
                [x.get("env_name") for x in inputs],
                kept,
            )
            rewards = torch.tensor([d["reward"] for d in details], dtype=torch.float32, device=ids.device)
            everyone = self.accelerator.gather(rewards)
            out["advantages"] = rewards - everyone.mean()
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["reward"].append(everyone.mean().item())
            self._metrics[mode]["reward_std"].append(everyone.std().item() if everyone.numel() > 1 else 0.0)
            return out

        def _get_last_hidden_state(self, unwrapped_model, *args, **kwargs):
            hidden = super()._get_last_hidden_state(unwrapped_model, *args, **kwargs)
            if unwrapped_model is self._capturing:  # the student's pass, not the teacher's
                self._student_hidden = hidden
            return hidden

        def _compute_loss(self, unwrapped_student, inputs, num_items_in_batch):
            self._capturing = unwrapped_student
            try:
                loss, entropy_sum, n_valid = super()._compute_loss(unwrapped_student, inputs, num_items_in_batch)
                hidden = self._student_hidden
            finally:
                self._capturing = self._student_hidden = None
            if hidden is None or "advantages" not in inputs:
                raise RuntimeError("distill.reward_weight: TRL's student pass was not seen; this TRL differs")
            head = unwrapped_student.get_output_embeddings()
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            mask = mask.to(head.weight.device)
            logits = head(hidden.to(head.weight.device)).float() / self.temperature
            logps = selective_log_softmax(logits, inputs["completion_ids"].to(head.weight.device))
            normalizer = num_items_in_batch if num_items_in_batch is not None else mask.sum().clamp(min=1)
            pg = reinforce_loss(logps, mask, inputs["advantages"].to(logps.device), normalizer)
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["reward_term"].append(pg.detach().item())
            return loss + self.reward_weight * pg, entropy_sum, n_valid

    return RewardMixedDistillation
