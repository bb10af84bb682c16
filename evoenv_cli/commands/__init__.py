"""The `evoenv` command line, beside cli.py: what every command shares (common.py) and the
commands that are not stages of the loop (tools.py, progressive.py)."""
