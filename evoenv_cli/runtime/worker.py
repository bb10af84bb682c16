"""The old path of the program inside the sandbox, now `runtime/sandbox_main.py`: scripts
that import it by this name keep working."""

from evoenv_cli.runtime.sandbox_main import *  # noqa: F403
