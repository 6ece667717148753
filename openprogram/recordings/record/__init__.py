"""Recording a call: the recorder at the provider boundary and its pipeline (the stream stage,
the encoder), which writes through :mod:`..file`. See ``docs/architecture.md``."""
