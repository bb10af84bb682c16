"""`evoenv tiny-model`: a loadable random-weight chat model and tokenizer, built offline; ChatML;
the same seed gives the same weights; a used folder is refused (exit 2, one line)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may download
os.environ.setdefault("OMP_NUM_THREADS", "1")

from evoenv_cli.errors import InputError  # noqa: E402
from evoenv_cli.llm import tiny  # noqa: E402


@pytest.mark.slow  # a subprocess that imports torch and transformers, then loads what it wrote
def test_cli_writes_a_model_and_tokenizer_that_load_offline(evoenv, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "tiny"
    r = evoenv("tiny-model", out, "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "parameters" in r.stderr and str(out) in r.stderr and r.stdout == ""
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    cfg = model.config
    assert cfg.model_type == "qwen3" and cfg.vocab_size == 2048 and cfg.head_dim == 16
    assert cfg.hidden_size == 64 and cfg.num_hidden_layers == 2 and cfg.num_key_value_heads == 2
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    assert len(tok) <= cfg.vocab_size
    assert tok.padding_side == "left"  # saved, not just set in memory
    assert tok.eos_token == tiny.IM_END and tok.pad_token == tiny.ENDOFTEXT
    eos_id, pad_id = tok.convert_tokens_to_ids([tiny.IM_END, tiny.ENDOFTEXT])
    assert cfg.eos_token_id == eos_id and cfg.pad_token_id == pad_id
    assert eos_id in model.generation_config.eos_token_id
    assert model.generation_config.pad_token_id == pad_id
    # special tokens are single tokens, and ordinary text round-trips through byte-level BPE
    ids = tok("<|im_start|>user\nx = 1<|im_end|>", add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids(tiny.IM_START) and ids[-1] == eos_id
    text = "def f(x):\n    return x ** 2  # ünïcode ✓"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_the_chat_template_renders_chatml(tmp_path):
    tok = tiny.build_tokenizer()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tok.apply_chat_template(messages[1:], tokenize=False, add_generation_prompt=False) == (
        "<|im_start|>user\n2+2?<|im_end|>\n"
    )


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_the_same_seed_gives_the_same_weights(tmp_path):
    a, b, c = (tiny.build_tiny_model(tmp_path / n, seed=s) for n, s in (("a", 5), ("b", 5), ("c", 6)))
    assert a["parameters"] == b["parameters"] == c["parameters"]
    wa, wb, wc = (_weights(tmp_path / n) for n in "abc")
    assert wa.keys() == wb.keys() == wc.keys()
    assert all((wa[k] == wb[k]).all() for k in wa)
    assert any(not (wa[k] == wc[k]).all() for k in wa)
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()


def test_head_dim_64_for_vllm_cpu(tmp_path):
    import json

    info = tiny.build_tiny_model(tmp_path / "m", head_dim=64)
    assert info["head_dim"] == 64
    assert json.loads((tmp_path / "m" / "config.json").read_text())["head_dim"] == 64


def test_a_folder_in_use_is_refused_in_one_line(evoenv, tmp_path):
    out = tmp_path / "used"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = evoenv("tiny-model", out)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--force" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    (tmp_path / "file").write_text("x")
    r = evoenv("tiny-model", tmp_path / "file")
    assert r.returncode == 2 and "not a folder" in r.stderr
    # --force writes next to what is there
    tiny.build_tiny_model(out, force=True)
    assert (out / "keep.txt").read_text() == "mine" and (out / "model.safetensors").is_file()
    with pytest.raises(InputError, match="not empty"):
        tiny.build_tiny_model(out)
