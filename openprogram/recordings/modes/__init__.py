"""The modes: one vocabulary (:mod:`.vocabulary`), one place that turns a mode into providers
(:mod:`.routes`), and what uses them: the activation plan of the ``record_replay``
configuration (:mod:`.activation`), ``use_recording`` (:mod:`.scoped`) and mode ``update``
(:mod:`.updating`). See ``docs/architecture.md``, "The modes"."""
