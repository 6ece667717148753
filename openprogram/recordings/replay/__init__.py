"""Serving a recording offline: the replayer, the first-difference rule and what replay
overlooks (volatile values), reading through :mod:`..file`. See ``docs/architecture.md``."""
