"""Quantize a trained TinyLoRA adapter's vector(s) to k bits and measure its description
length: the bits of everything that was chosen with data, which a compression bound pays for.

The codebook is a uniform symmetric grid of 2**k levels times one scale, and the scale is an
index into SCALES, a table fixed here in advance: the codebook costs log2(len(SCALES)) bits.
The hyperparameters searched cost log2 of the size of a grid also fixed in advance (a union
bound over it). The base model, the SVD factors it determines and the projection seed (so the
projection tensors) are fixed before the data: they cost 0 bits.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from evoenv_cli import artifacts
from evoenv_cli.errors import InputError

# 128 scales, 2**-24 to 2**7.75 in quarter-octaves: fixed before any data, so naming one is 7 bits.
SCALES = tuple(2.0 ** (e / 4) for e in range(-96, 32))
ADAPTER_FILE = "adapter_model.safetensors"
QUANTIZED_FILE = "quantized.json"
VECTOR_KEY = ".tinylora_v."  # in the saved state dict: base_model.tinylora_v.<group>
FREE = (
    "0 bits: the base model (and the SVD factors it determines) and the projection seed (and the "
    "projection tensors it determines) were fixed before the data"
)


def codebook(bits: int, scale: float) -> list[float]:
    """2**bits levels spread evenly over [-scale, scale]."""
    m = 2**bits
    if m == 2:
        return [-scale, scale]
    return [scale * (2 * j - (m - 1)) / (m - 1) for j in range(m)]


def nearest(values: list[float], bits: int, scale: float) -> list[int]:
    """The index of each value's nearest level of codebook(bits, scale)."""
    m = 2**bits
    return [min(m - 1, max(0, round((v / scale * (m - 1) + (m - 1)) / 2))) for v in values]


def quantize(values: list[float], bits: int) -> tuple[int, list[int]]:
    """(scale index, codes): the scale in SCALES whose codebook has the least squared error."""
    best = None
    for s, scale in enumerate(SCALES):
        codes = nearest(values, bits, scale)
        levels = codebook(bits, scale)
        err = sum((v - levels[c]) ** 2 for v, c in zip(values, codes))
        if best is None or err < best[0]:
            best = (err, s, codes)
    return best[1], best[2]


def grid_size(grid: dict[str, list]) -> int:
    """The number of hyperparameter settings the grid allows (the product of its axes)."""
    return math.prod(max(1, len(v)) for v in grid.values()) if grid else 1


@dataclass
class DescriptionLength:
    """The bits of a policy's code: values, codebook, and the union bound over the grid."""

    values: int  # trained values described
    bits_per_value: int
    value_bits: float
    codebook_bits: float
    grid_bits: float
    total: float
    free: str = FREE


def description_length(
    values: int, bits_per_value: int, grid: dict[str, list], codebook_bits: float
) -> DescriptionLength:
    value_bits = float(values * bits_per_value)
    grid_bits = math.log2(grid_size(grid))
    return DescriptionLength(
        values, bits_per_value, value_bits, codebook_bits, grid_bits, value_bits + codebook_bits + grid_bits
    )


def vector_keys(state: dict) -> list[str]:
    """The trained TinyLoRA vectors of a saved adapter, in a fixed order."""
    return sorted(k for k in state if VECTOR_KEY in k)


def quantize_adapter(adapter: Path, out: Path, bits: int, grid: dict[str, list], hyperparameters: dict) -> dict:
    """A copy of the TinyLoRA adapter in `adapter` with its vector(s) replaced by their k-bit
    codebook values, plus OUT/quantized.json: the codes, the scale's index and the bits."""
    from safetensors.torch import load_file, save

    path = adapter / ADAPTER_FILE
    config = (
        json.loads((adapter / "adapter_config.json").read_text()) if (adapter / "adapter_config.json").is_file() else {}
    )
    if config.get("peft_type") != "TINYLORA" or not path.is_file():
        raise InputError(f"{adapter}: not a TinyLoRA adapter (adapter_config.json with peft_type TINYLORA)")
    state = load_file(str(path))
    keys = vector_keys(state)
    values = [float(x) for k in keys for x in state[k].flatten().tolist()]
    scale_index, codes = quantize(values, bits)
    levels = codebook(bits, SCALES[scale_index])
    at = 0
    for k in keys:
        t = state[k]
        n = t.numel()
        state[k] = t.new_tensor([levels[c] for c in codes[at : at + n]]).reshape(t.shape)
        at += n
    out.mkdir(parents=True, exist_ok=True)
    for f in adapter.iterdir():  # tokenizer and config files travel with the adapter
        if f.is_file() and f.name != ADAPTER_FILE and not f.name.endswith(".safetensors"):
            shutil.copy2(f, out / f.name)
    artifacts.write_bytes_atomic(out / ADAPTER_FILE, save(state, metadata={"format": "pt"}))
    dl = description_length(len(values), bits, grid, math.log2(len(SCALES)))
    record = {
        "bits": bits,
        "scale_index": scale_index,
        "scale": SCALES[scale_index],
        "codes": codes,
        "keys": keys,
        "unquantized": values,
        "max_abs_error": max((abs(v - levels[c]) for v, c in zip(values, codes)), default=0.0),
        "hyperparameters": hyperparameters,
        "base_model": config.get("base_model_name_or_path"),
        "projection_seed": config.get("projection_seed"),
        "r": config.get("r"),
        "u": config.get("u"),
        "weight_tying": config.get("weight_tying"),
        "description_length": asdict(dl),
    }
    artifacts.write_json_atomic(out / QUANTIZED_FILE, record)
    return record
