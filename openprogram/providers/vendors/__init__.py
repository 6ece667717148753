"""The four vendor providers, each speaking its real wire protocol through the official SDK,
the one list of them (:mod:`.builtin`), and the helpers they share (:mod:`.common`,
:mod:`.openai_common`, :mod:`.wire`).

Every vendor module has the same four roles (:data:`.builtin.ROLES`):
``build_request_body`` turns a request into the vendor's wire body, a ``StreamTranslator``
turns the vendor's stream into our events through the shared stream assembly
(:mod:`openprogram.providers.assembly`), and, for ``openprogram proxy``,
``parse_request_body`` reads a client's wire request into ours and a ``StreamEncoder`` writes
our events back as the vendor's stream. The translators and encoders share one shape each
(:mod:`.roles`). A fifth vendor goes here, in a module of its own, with one more entry in
:mod:`.builtin` (see ``docs/architecture.md``).
"""
