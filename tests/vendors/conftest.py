"""The vendor wing's fixture: a scripted local server speaking the vendor's wire format to the
real SDK (``tests/vendor_server.py``), a fresh one per test, so no test sees another's queued
responses, requests or held connections."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.vendor_server import VendorServer


@pytest.fixture
def server() -> Iterator[VendorServer]:
    with VendorServer() as running:
        yield running
