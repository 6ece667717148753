"""What one proxy serves: where each api's live calls go, the recording session (if the proxy
runs one of its own), and the base-URL variables that point each SDK at it."""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse, urlsplit, urlunsplit

from ..providers.vendors.builtin import VENDOR_APIS, VENDORS

if TYPE_CHECKING:
    from ..providers.replay import ReplayOptions
    from ..providers.scoped import ProxyMode  # the proxy's modes, from the one vocabulary
    from ..providers.types import Model

#: The wire formats a proxy speaks, by api: one per vendor of the one list.
APIS = VENDOR_APIS

#: Where a live call goes when no ``--upstream`` names a server for its api: the vendor's own.
DEFAULT_UPSTREAMS: dict[str, str] = {vendor.api: vendor.upstream for vendor in VENDORS}

#: The base-URL environment variable each SDK reads, and what follows the proxy's address in
#: it: openai from 1.3.0, anthropic from 0.7.0, google-genai from 1.13.0 (its
#: ``_base_url.get_base_url``; the host only). Checked in the released wheels (docs/proxy.md).
SDK_BASE_URL_VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("openai", "OPENAI_BASE_URL", "/v1"),
    ("anthropic", "ANTHROPIC_BASE_URL", ""),
    ("google-genai", "GOOGLE_GEMINI_BASE_URL", ""),
)

#: The one request field replay overlooks in the proxy's own session: the upstream's address
#: (a test's scripted server listens on a new port at every run, and a replay calls none).
IGNORED_IN_REPLAY = ("model.base_url",)

#: Compiled ``normalize`` rules, by the rules (see :meth:`ProxySettings.lane_normalizer`).
_NORMALIZERS: dict[tuple[tuple[str, str], ...], Callable[[Any], Any]] = {}


@dataclass(frozen=True)
class ProxySettings:
    """``recording`` and ``mode`` give the proxy a recording session of its own (the command's
    ``--recording`` / ``--mode``, or a test fixture's); without them every call goes through
    the mode the ``record_replay`` configuration puts in force, like any other call of the
    process. ``ignore``, ``normalize``, ``values`` and ``secrets`` are ``use_recording``'s;
    ``normalize`` also applies to the lanes derived from a conversation's start (a fixture
    whose test runs the session passes its rules for that alone).

    ``env_keys`` (the command's ``--env-keys``) lets a request that carries no credential of its
    own be sent with the key of the proxy's environment (``OPENAI_API_KEY`` ...); by default it
    gets none, so that whoever reaches the proxy cannot spend its owner's keys.
    ``client_token``, when set, is a key every request must carry (the ``llm_proxy`` fixture's
    per-test token in replay): others are refused, and it is never sent on."""

    upstreams: Mapping[str, str] = field(default_factory=dict)
    recording: Path | None = None
    mode: ProxyMode | None = None
    ignore: tuple[str, ...] = ()
    normalize: tuple[tuple[str, str], ...] = ()
    values: Mapping[str, str] | None = None
    secrets: tuple[str, ...] | None = None
    env_keys: bool = False
    client_token: str | None = field(default=None, repr=False, compare=False)
    #: The context every call runs in, asked for at each request (the ``llm_proxy`` fixture's:
    #: the running test's, with its recording scope; it raises for a request that comes while
    #: no test body runs). The proxy then runs no session of its own; ``mode`` and
    #: ``recording`` say what the calls do there, for the lane book of a replay.
    call_context: Callable[[], contextvars.Context] | None = field(default=None, compare=False)
    #: The apis whose upstream a project file chose, and that file: a client's key goes to
    #: such an upstream only on a host the user trusts (docs/project.md, "Security").
    project_upstreams: Mapping[str, str] = field(default_factory=dict)
    #: Faults, re-chunking and pacing of the replay (``--fault``, ``--rechunk``, ``--pace``,
    #: or the test's): handed to the proxy's own replay session, and read by the exchange,
    #: which splits the bytes of a re-chunked stream too.
    replay: ReplayOptions | None = None

    def __post_init__(self) -> None:
        for api, url in self.upstreams.items():
            check_upstream(api, url)
        if self.mode is not None:
            from ..providers.scoped import PROXY_MODES, validate_record_mode

            validate_record_mode(self.mode, PROXY_MODES, "the proxy's mode")
        if self.mode not in (None, "off") and self.recording is None:
            raise ValueError("a mode needs a recording file to apply to (--recording FILE)")
        if self.mode == "off" and self.recording is not None:
            raise ValueError(
                "mode off records nothing: drop --recording, or choose record or update"
            )
        if self.replay and self.call_context is None and self.session_mode != "replay":
            raise ValueError(
                "--fault, --rechunk and --pace change what a replay serves: give the proxy a "
                "recording to replay (--recording FILE, --mode replay)"
            )

    def lane_normalizer(self) -> Callable[[Any], Any] | None:
        """The ``normalize`` rules as a function, for the lanes derived from a conversation's
        start (None without rules). Compiled once per settings."""
        if not self.normalize:
            return None
        cached = _NORMALIZERS.get(self.normalize)
        if cached is None:
            from ..providers.replay import normalizer

            cached = _NORMALIZERS[self.normalize] = normalizer(self.normalize)
        return cached

    def upstream(self, api: str) -> str:
        return self.upstreams.get(api) or DEFAULT_UPSTREAMS[api]

    def live_base_url(self, api: str, model: Model | None) -> str:
        """Where a live call of ``api`` for ``model`` goes: the upstream configured for the api
        (``--upstream``, the marker's ``upstream=``, the project's table), else the model's own
        ``base_url`` (a project's model on its local server), else the vendor's own server."""
        return (
            self.upstreams.get(api)
            or (model.base_url if model is not None else "")
            or DEFAULT_UPSTREAMS[api]
        )

    def key_refusal(self, api: str) -> str | None:
        """Why a client's key must not go to ``api``'s upstream (None: it may): only an
        upstream a project file chose is checked, against the vendor's own host, loopback and
        the hosts the user trusts."""
        source = self.project_upstreams.get(api)
        if source is None or self.upstream(api) != self.upstreams.get(api):
            return None
        from ..providers.key_trust import host_of, host_trusted_for_key, untrusted_host_message

        host = host_of(self.upstream(api))
        vendor = host_of(DEFAULT_UPSTREAMS[api])
        if host is None or host_trusted_for_key(host, frozenset({vendor} if vendor else ())):
            return None
        return untrusted_host_message(host, f"{host} (the upstream of {api} that {source} sets)")

    @property
    def session_mode(self) -> ProxyMode | None:
        """The mode of the proxy's own session, or None when the configuration's applies."""
        if self.call_context is not None:
            return None
        if self.mode == "off":
            return "off"
        if self.recording is None:
            return None
        return self.mode or "replay"


def check_upstream(api: str, url: str) -> None:
    if api not in APIS:
        raise ValueError(f"unknown api {api!r} for an upstream (one of {', '.join(APIS)})")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"the upstream of {api} must be an http(s) URL, not {shown_url(url)!r}")


def parse_upstream(text: str) -> tuple[str, str]:
    """``API=URL`` (the command's ``--upstream``) as ``(api, url)``; ``ValueError`` otherwise."""
    api, separator, url = text.partition("=")
    if not separator:
        raise ValueError(
            f"--upstream takes API=URL (such as openai-completions=http://127.0.0.1:8000/v1), not {shown_url(text)!r}"
        )
    check_upstream(api.strip(), url.strip())
    return api.strip(), url.strip().rstrip("/")


#: An alphanumeric run of 8 or more characters mixing letters and digits: a generated value.
_GENERATED = re.compile(r"(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{8,}")


def shown_url(url: str) -> str:
    """``url`` as the proxy prints it (start-up lines, errors): a user name and password
    replaced, and so is every query value with a secret's name (``key``, ``token``,
    ``api_key`` ...) or a generated look (``sig=9f8e7d6c...``); the rest redacted as the
    recording would be. What is shown of an upstream says where calls go, never with what."""
    from ..providers.recording import PLACEHOLDER, remove_secret_values

    try:
        parsed = urlsplit(url)
    except ValueError:
        return str(remove_secret_values(url))
    netloc = parsed.netloc
    if "@" in netloc:
        netloc = PLACEHOLDER + "@" + netloc.rpartition("@")[2]
    parts = []
    for part in parsed.query.split("&") if parsed.query else []:
        name, separator, value = part.partition("=")
        secret = (
            remove_secret_values({name: value}) != {name: value}
            or remove_secret_values(f"?{part}") != f"?{part}"
            or any(_GENERATED.fullmatch(run) for run in re.split(r"[^A-Za-z0-9]+", value))
        )
        parts.append(f"{name}{separator}{PLACEHOLDER}" if separator and secret else part)
    shown = urlunsplit((parsed.scheme, netloc, parsed.path, "&".join(parts), parsed.fragment))
    return str(remove_secret_values(shown))


def base_url_environment(url: str) -> dict[str, str]:
    """The environment that points every SDK at the proxy listening on ``url``."""
    return {variable: url + suffix for _, variable, suffix in SDK_BASE_URL_VARIABLES}


__all__ = [
    "APIS",
    "DEFAULT_UPSTREAMS",
    "IGNORED_IN_REPLAY",
    "ProxySettings",
    "SDK_BASE_URL_VARIABLES",
    "base_url_environment",
    "check_upstream",
    "parse_upstream",
    "shown_url",
]
