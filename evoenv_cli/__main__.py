"""`python -m evoenv_cli ...` (what `accelerate launch -m evoenv_cli train ...` runs)."""

from evoenv_cli.cli import main

main()
