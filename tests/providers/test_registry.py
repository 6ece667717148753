"""Registry and transform semantics (see ``docs/architecture.md``): registration, lookup and the one process-wide transform."""

from __future__ import annotations

import pytest

from openprogram.providers.api_registry import (
    configure_provider_transform,
    lookup_registered_provider,
    register_api_provider,
)


class Dummy:
    def __init__(self, name: str) -> None:
        self.name = name


class Wrapped:
    def __init__(self, api: str, original) -> None:
        self.api = api
        self.original = original


def wrap(api, original):
    return Wrapped(api, original)


def test_register_and_lookup_without_transform(fresh_registry):
    provider = Dummy("a")
    register_api_provider("a", provider)
    assert lookup_registered_provider("a") is provider
    assert lookup_registered_provider("missing") is None


def test_transform_applies_to_providers_registered_before_and_after(fresh_registry):
    before = Dummy("before")
    register_api_provider("before", before)
    configure_provider_transform(wrap)
    after = Dummy("after")
    register_api_provider("after", after)
    for api, original in (("before", before), ("after", after)):
        served = lookup_registered_provider(api)
        assert isinstance(served, Wrapped)
        assert served.original is original and served.api == api


def test_transform_always_receives_the_original_provider(fresh_registry):
    original = Dummy("x")
    configure_provider_transform(wrap)
    register_api_provider("x", original)
    register_api_provider("x", original)  # re-registering must not wrap a wrapper
    served = lookup_registered_provider("x")
    assert served.original is original


def test_same_transform_twice_is_a_no_op_and_a_different_one_raises(fresh_registry):
    register_api_provider("a", Dummy("a"))
    configure_provider_transform(wrap)
    first = lookup_registered_provider("a")
    configure_provider_transform(wrap)
    assert lookup_registered_provider("a") is first
    with pytest.raises(RuntimeError, match="already installed"):
        configure_provider_transform(lambda api, original: original)
    assert lookup_registered_provider("a") is first


def test_raising_transform_leaves_the_registry_unchanged(fresh_registry):
    good, bad = Dummy("good"), Dummy("bad")
    register_api_provider("good", good)
    register_api_provider("bad", bad)

    def picky(api, original):
        if api == "bad":
            raise ValueError("no")
        return Wrapped(api, original)

    with pytest.raises(ValueError):
        configure_provider_transform(picky)
    assert lookup_registered_provider("good") is good
    assert lookup_registered_provider("bad") is bad
    # the failed transform was not installed: another one can still be
    configure_provider_transform(wrap)
    assert isinstance(lookup_registered_provider("good"), Wrapped)


def test_transform_raising_at_registration_leaves_the_registry_unchanged(fresh_registry):
    existing = Dummy("old")
    register_api_provider("x", existing)

    def refuse_new(api, original):
        if original.name == "new":
            raise ValueError("refused")
        return original

    configure_provider_transform(refuse_new)
    with pytest.raises(ValueError):
        register_api_provider("x", Dummy("new"))
    assert lookup_registered_provider("x") is existing


def test_providing_stands_in_for_the_registered_provider_inside_its_block_only(fresh_registry):
    """``providing(api, p)``: lookups inside the block get ``p`` as the transform or a scoped
    route would serve the registered provider; outside, and for other apis, nothing changes."""
    import asyncio

    from openprogram.providers.api_registry import _scoped_route, providing

    registered, standing_in = Dummy("registered"), Dummy("per request")
    register_api_provider("a", registered)
    register_api_provider("b", Dummy("b"))
    with providing("a", standing_in):
        assert lookup_registered_provider("a") is standing_in
        assert lookup_registered_provider("b").name == "b"
        token = _scoped_route.set(wrap)  # a recording scope wraps it as the original
        try:
            served = lookup_registered_provider("a")
            assert isinstance(served, Wrapped) and served.original is standing_in
        finally:
            _scoped_route.reset(token)

        async def in_a_task():  # tasks started inside see it too
            return lookup_registered_provider("a")

        assert asyncio.run(in_a_task()) is standing_in
    assert lookup_registered_provider("a") is registered
    configure_provider_transform(wrap)
    with providing("a", standing_in):
        served = lookup_registered_provider("a")
        assert isinstance(served, Wrapped) and served.original is standing_in
    assert lookup_registered_provider("a").original is registered
