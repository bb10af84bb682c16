"""Where evoenv meets other tools: the reward entry points trainers call (TRL, verl, OpenRLHF,
the reward server), the reward audit, the verifiers export and reasoning-gym's tasks."""
