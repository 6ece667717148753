"""Managing recordings and the modes: the managed folder, the activation plan, ``use_recording``,
``update`` mode and recovery. See ``docs/architecture.md``."""
