"""The old path of `evoenv_cli.integrations.rewards`, which verl (`custom_reward_function.path`),
OpenRLHF and TRL configs written before the move name: the same entry points."""

from evoenv_cli.integrations.rewards import *  # noqa: F403
