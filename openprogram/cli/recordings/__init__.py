"""``openprogram recordings VERB``: record and replay model calls, and manage recordings.

One module per group of verbs, over three shared rooms (docs/architecture.md, "The command
line"): :mod:`.command` wires the groups into argparse and dispatches; :mod:`.lifecycle`
(status, record, replay, off), :mod:`.inspecting` (list, show), :mod:`.compare` (diff,
doctor), :mod:`.page` (view) and :mod:`.maintain` (delete, prune, recover) hold the verbs;
:mod:`.verb`, :mod:`.console`, :mod:`.selecting` and :mod:`.render` are what they share. A
group never imports another group.

This package imports nothing at load time, so that ``openprogram recordings`` starts fast.
"""
