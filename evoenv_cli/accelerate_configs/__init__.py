"""accelerate config files for `evoenv train` on several GPUs, shipped inside the package so a
recipe names one (`train.accelerate_config: zero3`) and the loop's `accelerate launch` gets
its path; without one, `accelerate launch --num_processes N` is plain DDP, where every GPU
holds the full weights, gradients and AdamW state."""

from __future__ import annotations

from pathlib import Path

from evoenv_cli.errors import InputError

SHIPPED = ("zero2", "zero3", "fsdp")


def config_path(name: str) -> Path:
    """The file for a shipped config's name, or a YAML file the user named; an InputError
    naming the choices otherwise."""
    if name in SHIPPED:
        return Path(__file__).with_name(f"{name}.yaml")
    path = Path(name).expanduser()
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    raise InputError(
        f"train.accelerate_config: {name!r} is neither one of {', '.join(SHIPPED)} nor a YAML file that exists"
    )
