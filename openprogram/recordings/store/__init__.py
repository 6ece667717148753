"""Managing recordings: the managed folder and its selectors, listing, deletion and recovery.
The modes that use a recording live in :mod:`..modes`. See ``docs/architecture.md``."""
