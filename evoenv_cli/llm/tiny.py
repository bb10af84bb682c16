"""A tiny random-weight chat model and tokenizer, built locally with no downloads.

Tests, the CPU demo and users without a GPU use it to run the whole pipeline: every backend
(`hf`, `openai` against `transformers serve`, `vllm`) loads it like any Hugging Face checkpoint.
What it writes, following ../shared/design/stack-notes.md:

- a byte-level BPE tokenizer (2,048 tokens) trained in well under a second on a few standard
  library sources, with the special tokens `<|endoftext|>` (padding), `<|im_start|>` and
  `<|im_end|>` (end of a turn: the EOS) and a ChatML chat template, left padding;
- a Qwen3-architecture model (2 layers, hidden size 64, about 0.2M parameters with head_dim 16)
  with random weights from `torch.manual_seed(seed)`: the same seed gives the same weights.

vLLM's CPU build needs head_dim 64 (`head_dim=64`). The texts it writes are random tokens: it
exercises plumbing (batching, templates, token counts, finish reasons), not reasoning.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from evoenv_cli.errors import InputError
from evoenv_cli.filemodes import follow_umask

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
VOCAB_SIZE = 2048

# ChatML, the format Qwen, vLLM and transformers serve all expect.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Local text to train the tokenizer on: a few standard-library sources (always on disk).
_CORPUS_FILES = (
    "textwrap.py",
    "string.py",
    "heapq.py",
    "bisect.py",
    "fractions.py",
    "json/decoder.py",
    "json/encoder.py",
    "random.py",
)
_FALLBACK_TEXT = (
    "def generate(seed, difficulty):\n    rng = random.Random(seed)\n    return {'n': difficulty}\n"
    "Reason step by step, then give your final answer between <answer> and </answer>.\n"
    "The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9\n"
)


def _corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for rel in _CORPUS_FILES:
        try:
            texts.append((stdlib / rel).read_text(encoding="utf-8"))
        except OSError:
            continue
    return texts + [_FALLBACK_TEXT]


def build_tokenizer():
    """A PreTrainedTokenizerFast: byte-level BPE, ChatML template, left padding."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[ENDOFTEXT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    # padding_side must go to the constructor: set afterwards, it is not saved.
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
        model_max_length=4096,
    )


def check_target(out_dir: Path, force: bool) -> None:
    """Refuse a file, or a non-empty folder without `force` (an InputError: exit 2)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise InputError(f"{out_dir}: folder is not empty; pass --force to write the model into it anyway")


def _portable_tokenizer_class(path: Path) -> None:
    """Name the tokenizer class by its transformers 4 name (an alias in 5), so the older
    transformers that vLLM pins loads it too."""
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    data.pop("backend", None)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def build_tiny_model(out_dir: str | Path, seed: int = 0, head_dim: int = 16, force: bool = False) -> dict:
    """Write the tiny model and tokenizer to `out_dir`; returns a short description."""
    out = Path(out_dir)
    check_target(out, force)
    if head_dim < 1:
        raise InputError(f"--head-dim must be at least 1, got {head_dim}")

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    tokenizer = build_tokenizer()
    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    pad_id = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    config = AutoConfig.for_model(
        "qwen3",
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG state alone
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = [eos_id, pad_id]
    model.generation_config.pad_token_id = pad_id
    model.generation_config.bos_token_id = None
    # Sample by default: servers that read the generation config (transformers serve) would
    # otherwise decode greedily whatever temperature a request asks for.
    model.generation_config.do_sample = True
    model.generation_config.temperature = 1.0
    model.generation_config.top_p = 1.0

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _portable_tokenizer_class(out / "tokenizer_config.json")
    follow_umask(out)  # transformers writes model.safetensors 0600
    params = sum(p.numel() for p in model.parameters())
    return {"path": str(out), "parameters": params, "vocab_size": len(tokenizer), "head_dim": head_dim, "seed": seed}
