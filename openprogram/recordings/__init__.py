"""Record/replay: the recording file format, the recorder and its sink, redaction, the strict
reader, the replayer, the managed recordings folder, the activation plan that turns the
configuration into what the runtime installs, and the views of a recording (inspection,
comparison, conversation).

The public import paths stay in :mod:`openprogram.providers` (``recording``, ``replay``,
``use_recording``); this package is where the engine lives. ``docs/architecture.md`` shows how
it fits with the provider layer and the CLI. Importing it imports nothing heavy.
"""
