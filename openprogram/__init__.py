"""openprogram: LLM agents whose model calls can be recorded once and replayed offline."""

__version__ = "0.1.0"
