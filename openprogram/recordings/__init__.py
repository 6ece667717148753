"""Record/replay, grouped by job: ``file/`` (the format, the writer, the strict reader),
``record/`` (the recorder and its pipeline), ``replay/`` (the replayer and the comparison rule),
``views/`` (what ``list``, ``show``, ``diff`` and ``view`` show), ``store/`` (the managed
folder, listing and recovery) and ``modes/`` (the modes, the routes they build, the activation
plan, ``use_recording`` and update); ``redaction.py`` holds the rules all of them apply.

The public import paths stay in :mod:`openprogram.providers` (``recording``, ``replay``,
``use_recording``); this package is where the engine lives. ``docs/architecture.md`` shows how
it fits with the provider layer and the CLI. Importing it imports nothing heavy.
"""
