"""How each vendor fails: what its server answers for a rate limit, an overload and a server
error, and the exception its SDK raises for each failure a replay can serve (see
:mod:`openprogram.providers.faults`).

One table per vendor, read two ways: ``openprogram proxy`` sends a fault's
:class:`FaultAnswer` to the client's SDK as it is (so that SDK's own retry logic runs), and a
replay through the provider layer builds the exception the vendor provider meets live, which
the provider's own error describer turns into the ``error_message`` a live call would show.
The transport failures (a stall, a dropped connection, a refused one) are the exceptions the
SDKs raise for them, as a local server that misbehaves this way shows (tests/vendors/test_faults.py
compares each with a live provider's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from ..base import AssembledProvider
from ..types import Model
from .builtin import VENDORS, vendor_of
from .common import describe_provider_error, sdk_http_module

#: Where a vendor's answer is said to come from (an SDK exception carries its request).
_VENDOR_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "google": "https://generativelanguage.googleapis.com/v1beta",
}

#: The SDK family that speaks each api (None: no vendor SDK, e.g. ``faux``), from the one list.
VENDOR_OF_API = {vendor.api: vendor.sdk for vendor in VENDORS}

#: What a client reads a short wait from: the SDKs honour ``retry-after`` (seconds).
RETRY_AFTER = {"retry-after": "1"}

#: What httpx says when a connection drops before the body ended.
CUT_MESSAGE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)
#: What httpx says when nothing accepts the connection.
REFUSED_MESSAGE = "All connection attempts failed"


@dataclass(frozen=True)
class FaultAnswer:
    """A vendor's HTTP answer to a failed request: its status, the headers beside
    ``content-type: application/json``, and its JSON error body."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _google_error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


#: The answers, by vendor and fault kind, as each vendor's API sends them.
FAULT_ANSWERS: dict[str, dict[str, FaultAnswer]] = {
    "openai": {
        "rate_limit": FaultAnswer(
            429,
            _openai_error(
                "Rate limit reached for requests per min (RPM). Please try again in 1s. "
                "Visit https://platform.openai.com/account/rate-limits to learn more.",
                "requests",
                "rate_limit_exceeded",
            ),
            RETRY_AFTER,
        ),
        "overloaded": FaultAnswer(
            503,
            _openai_error(
                "That model is currently overloaded with other requests. You can retry your request, "
                "or contact us through our help center at help.openai.com if the error persists.",
                "server_error",
            ),
        ),
        "server_error": FaultAnswer(
            500,
            _openai_error(
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
            ),
        ),
    },
    "anthropic": {
        "rate_limit": FaultAnswer(
            429,
            _anthropic_error(
                "rate_limit_error",
                "Number of requests has exceeded your per-minute rate limit "
                "(https://docs.anthropic.com/en/api/rate-limits); see the response headers for current "
                "usage. Please try again later.",
            ),
            RETRY_AFTER,
        ),
        "overloaded": FaultAnswer(529, _anthropic_error("overloaded_error", "Overloaded")),
        "server_error": FaultAnswer(500, _anthropic_error("api_error", "Internal server error")),
    },
    "google": {
        "rate_limit": FaultAnswer(
            429,
            _google_error(
                429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
            ),
            RETRY_AFTER,
        ),
        "overloaded": FaultAnswer(
            503,
            _google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        ),
        "server_error": FaultAnswer(
            500,
            _google_error(
                500,
                "INTERNAL",
                "An internal error has occurred. Please retry or report in "
                "https://developers.generativeai.google/guide/troubleshooting",
            ),
        ),
    },
}


def fault_answer(api: str, kind: str) -> FaultAnswer | None:
    """The answer ``api``'s server gives for a fault ``kind``, or None for the kinds that are
    no answer (``timeout``, ``cut``, ``network``). An api without a vendor answers as OpenAI
    does (the shape every compatible server copies)."""
    return FAULT_ANSWERS[VENDOR_OF_API.get(api, "openai")].get(kind)


class _StatusFailure(Exception):
    """An HTTP failure of a provider without a vendor SDK, as the shared describer reads it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status
        self.message = message


def fault_exception(api: str, kind: str, *, mid_stream: bool) -> BaseException:
    """The exception the vendor provider of ``api`` meets live when its vendor fails this way
    (``mid_stream``: after the answer started), as its SDK builds it."""
    vendor = VENDOR_OF_API.get(api)
    answer = fault_answer(api, kind)
    if vendor is None:  # no vendor SDK: the failure in plain words
        if answer is not None:
            return _StatusFailure(answer.status, HTTPStatus(answer.status).phrase)
        return (
            TimeoutError("timed out")
            if kind == "timeout"
            else ConnectionError(CUT_MESSAGE if kind == "cut" else REFUSED_MESSAGE)
        )
    http = sdk_http_module()
    request = http.Request("POST", _VENDOR_URLS[vendor])
    if answer is not None:
        response = http.Response(
            answer.status,
            headers={"content-type": "application/json", **answer.headers},
            json=answer.body,
            request=request,
        )
        return _STATUS_ERRORS[vendor](answer, response)
    transport = {
        "timeout": lambda: http.ReadTimeout(""),
        "cut": lambda: http.RemoteProtocolError(CUT_MESSAGE),
        "network": lambda: http.ConnectError(REFUSED_MESSAGE),
    }[kind]()
    return _TRANSPORT_ERRORS[vendor](kind, transport, request, mid_stream)


def describe_fault(model: Model, kind: str, *, mid_stream: bool) -> str:
    """The ``error_message`` the vendor provider of ``model.api`` gives for this failure: its
    SDK's exception (:func:`fault_exception`) through the provider's own describer. An api
    without a vendor provider gets the shared description."""
    error = fault_exception(model.api, kind, mid_stream=mid_stream)
    provider = _vendor_provider(model.api)
    if provider is None:
        return describe_provider_error(model.provider)(error)
    return provider.describe_error(model)(error)


def _vendor_provider(api: str) -> AssembledProvider | None:
    vendor = vendor_of(api)
    if vendor is None:
        return None
    provider = vendor.provider()
    assert isinstance(provider, AssembledProvider)
    return provider


def _openai_status(answer: FaultAnswer, response: Any) -> BaseException:
    import openai

    body = answer.body.get("error", answer.body)
    message = f"Error code: {answer.status} - {body.get('message')}"
    kind = openai.RateLimitError if answer.status == 429 else openai.InternalServerError
    return kind(message, response=response, body=body)


def _anthropic_status(answer: FaultAnswer, response: Any) -> BaseException:
    import anthropic

    kinds = {
        429: anthropic.RateLimitError,
        529: getattr(anthropic, "OverloadedError", anthropic.InternalServerError),
    }
    kind = kinds.get(answer.status, anthropic.InternalServerError)
    return kind(f"Error code: {answer.status} - {answer.body}", response=response, body=answer.body)


def _google_status(answer: FaultAnswer, response: Any) -> BaseException:
    from google.genai import errors

    kind = errors.ClientError if answer.status < 500 else errors.ServerError
    return kind(answer.status, answer.body, response)


_STATUS_ERRORS = {
    "openai": _openai_status,
    "anthropic": _anthropic_status,
    "google": _google_status,
}


def _openai_transport(
    kind: str, cause: BaseException, request: Any, mid_stream: bool
) -> BaseException:
    """The openai SDK wraps every transport failure, also one inside a stream."""
    import openai

    error = (
        openai.APITimeoutError(request)
        if kind == "timeout"
        else openai.APIConnectionError(request=request)
    )
    error.__cause__ = cause
    return error


def _anthropic_transport(
    kind: str, cause: BaseException, request: Any, mid_stream: bool
) -> BaseException:
    """The anthropic SDK wraps a failure to get an answer; one inside a stream is httpx's own."""
    import anthropic

    if mid_stream or kind == "cut":
        return cause
    error = (
        anthropic.APITimeoutError(request)
        if kind == "timeout"
        else anthropic.APIConnectionError(request=request)
    )
    error.__cause__ = cause
    return error


def _google_transport(
    kind: str, cause: BaseException, request: Any, mid_stream: bool
) -> BaseException:
    """google-genai lets httpx's errors through, before and inside a stream."""
    return cause


_TRANSPORT_ERRORS = {
    "openai": _openai_transport,
    "anthropic": _anthropic_transport,
    "google": _google_transport,
}


__all__ = [
    "FAULT_ANSWERS",
    "FaultAnswer",
    "RETRY_AFTER",
    "VENDOR_OF_API",
    "describe_fault",
    "fault_answer",
    "fault_exception",
]
