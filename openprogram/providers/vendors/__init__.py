"""The four vendor providers, each speaking its real wire protocol through the official SDK,
and the helpers they share (:mod:`.common`, :mod:`.openai_common`).

Every vendor module has the same two roles: ``build_request_body`` turns a request into the
vendor's wire body, and a ``StreamTranslator`` turns the vendor's stream into our events
through the shared stream assembly (:mod:`openprogram.providers.assembly`). A fifth vendor goes
here, in a module of its own (see ``docs/architecture.md``).
"""
