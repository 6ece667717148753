"""The recording file: its format and version rules (:mod:`.format`), the patches that keep
it linear, the shared writer (:mod:`.sink`) and the one strict reader (:mod:`.reader`). Knows
nothing of recording, replaying or the views; see ``docs/file-format.md``."""
