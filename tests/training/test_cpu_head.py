"""TRL's fused LM head, compact on a CPU: the same log-probabilities and gradients as TRL's
every-position path, over the completion's positions only (training/cpu_head.py)."""

from __future__ import annotations

import importlib

import pytest

from evoenv_cli.training import cpu_head

torch = trl_utils = None  # imported when this module's tests run (_imports)


@pytest.fixture(scope="module", autouse=True)
def _imports():
    """torch and TRL imported when these tests run, not when pytest collects the module: every
    xdist worker collects every module, and these imports were 7 of the 14 CPU-seconds a
    worker's collection took."""
    global torch, trl_utils
    torch = pytest.importorskip("torch")
    trl_utils = pytest.importorskip("trl.trainer.utils")


@pytest.fixture
def restored():
    """TRL's own decisions during the test, whatever an earlier test in this process left
    (train and distill apply the patch in-process); the patch is process-wide, so what was
    there before is put back after."""
    saved = {m: importlib.import_module(m)._use_triton for m in cpu_head._DECIDERS}
    for m, f in saved.items():
        importlib.import_module(m)._use_triton = getattr(f, "__wrapped__", f)
    yield
    for m, f in saved.items():
        importlib.import_module(m)._use_triton = f


def _logps_and_grads(model, ids, labels):
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, fused_lm_head=True)
    # a GRPO-like weighting of the completion's tokens, so the gradient is not the plain loss's
    weights = torch.linspace(-1.0, 1.0, out.log_probs.numel()).view_as(out.log_probs)
    (out.log_probs * weights).sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.log_probs.detach(), out.entropy.detach(), grads


def test_compact_scores_only_the_completion_and_changes_no_number(tiny_model, restored, monkeypatch):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    trl_utils.add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, model.config.vocab_size, (3, 40))
    labels = ids.clone()
    labels[:, :32] = -100  # a 32-token prompt, an 8-token completion, as GRPO masks them

    rows = []
    real_apply = trl_utils._ChunkedLogProbFunction.apply

    def counting(hidden, *rest):
        rows.append(hidden.shape[0])
        return real_apply(hidden, *rest)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counting)
    full = _logps_and_grads(model, ids, labels)
    assert cpu_head.compact_lm_head_on_cpu() == list(cpu_head._DECIDERS)
    assert cpu_head.compact_lm_head_on_cpu() == []  # once is enough
    compact = _logps_and_grads(model, ids, labels)
    assert rows == [3 * 39, 3 * 8]  # every shifted position, then the completion's alone
    torch.testing.assert_close(compact[0], full[0])
    torch.testing.assert_close(compact[1], full[1])
    assert compact[2].keys() == full[2].keys() and full[2]
    for name, g in full[2].items():
        torch.testing.assert_close(compact[2][name], g, rtol=1e-4, atol=1e-6)


def test_other_devices_keep_trls_own_choice(restored):
    assert trl_utils._use_triton(torch.device("cpu")) is False  # TRL's own answer off Triton
    cpu_head.compact_lm_head_on_cpu()
    decide = trl_utils._use_triton
    assert decide(torch.device("cpu")) is True
    assert decide(torch.device("meta")) is False  # no Triton there, and not a CPU: TRL's choice


def test_the_distillation_loss_is_the_same_compact_and_full(restored):
    """distill's reverse KL (TRL's _chunked_divergence_loss): the same loss, entropy and
    student gradient over the completion's positions alone as over every position."""
    dist = importlib.import_module("trl.trainer.distillation_trainer")
    torch.manual_seed(0)
    vocab, hidden = 97, 16
    student_h = torch.randn(2, 10, hidden, requires_grad=True)
    teacher_h = torch.randn(2, 10, hidden)
    w_s, w_t = torch.randn(vocab, hidden, requires_grad=True), torch.randn(vocab, hidden)
    mask = torch.zeros(2, 10, dtype=torch.long)
    mask[:, 6:] = 1  # the completion: the last 4 positions of each row

    def run():
        student_h.grad, w_s.grad = None, None
        loss, entropy, n = dist._chunked_divergence_loss(
            student_h, teacher_h, w_s, w_t, mask, beta=1.0, temperature=0.7
        )
        loss.backward()
        return loss.detach(), entropy.detach(), n, student_h.grad.clone(), w_s.grad.clone()

    full = run()
    assert cpu_head.compact_lm_head_on_cpu() == list(cpu_head._DECIDERS)
    assert dist._use_triton(student_h.device) is True
    compact = run()
    assert compact[2] == full[2] == 8
    for a, b in zip(compact, full):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
