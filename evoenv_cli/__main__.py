"""`python -m evoenv_cli ...` (what `accelerate launch -m evoenv_cli run-context ...` runs for the loop's train)."""

from evoenv_cli.cli import main

main()
