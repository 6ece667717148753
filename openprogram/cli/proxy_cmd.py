"""``openprogram proxy``: a local server that speaks the vendors' wire formats, so code calling
a vendor SDK directly (any framework, any language) gets recordings: point the SDK's base URL at
it. Argument parsing and printing only; the server is :mod:`openprogram.proxy` (docs/proxy.md).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from openprogram.recordings.modes.vocabulary import PROXY_MODES

from .errors import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from openprogram.providers.replay import ReplayOptions

DEFAULT_PORT = 8765


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "proxy",
        help="serve the vendor APIs locally and record or replay every call made through them",
        description=(
            "Serve POST /v1/chat/completions, /v1/responses, /v1/messages and "
            "/v1beta/models/MODEL:generateContent (streaming or not) and GET /v1/models. Each "
            "call goes through the mode in force (the record_replay configuration, or "
            "--mode/--recording for this session only). Live calls use the client's own key, "
            "which is never recorded. Only requests addressed to localhost and sent as JSON are "
            "answered, none from a web page elsewhere (docs/proxy.md, Security)."
        ),
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1, loopback only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="API=URL",
        help="where live calls of an api go (a compatible server, a gateway), such as "
        "openai-completions=http://127.0.0.1:11434/v1; repeatable. Default: the vendor's own",
    )
    parser.add_argument(
        "--mode",
        choices=PROXY_MODES,
        help="record, replay or update --recording for this session (default replay), or off "
        "(every call live, nothing recorded), instead of the record_replay configuration",
    )
    parser.add_argument("--recording", metavar="FILE", help="the recording file of this session")
    parser.add_argument(
        "--env-keys",
        action="store_true",
        help="send a request that carries no key of its own with this process's key "
        "(OPENAI_API_KEY ...); by default it gets none, so no one else can spend your keys",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help="answer a replayed call as its vendor fails: kind[@call][:event][xtimes] with kind "
        "rate_limit, overloaded, server_error, timeout, cut or network (rate_limit@1, cut@0:15); "
        "the retry gets the recording; repeatable",
    )
    parser.add_argument(
        "--rechunk",
        metavar="SEED|random",
        help="re-split every replayed stream at seeded boundaries (random: a seed picked and printed)",
    )
    parser.add_argument(
        "--pace",
        metavar="recorded|FACTOR",
        help="wait the recorded time before and between replayed events, or that time scaled by FACTOR",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from openprogram.proxy.settings import ProxySettings, parse_upstream

    replay = _replay_options(args)
    try:
        named = dict(parse_upstream(text) for text in args.upstream)
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    project_upstreams, project_file = _project_upstreams()
    try:
        settings = ProxySettings(
            upstreams={**project_upstreams, **named},
            recording=Path(args.recording) if args.recording else None,
            mode=args.mode,
            # a client's key goes to an upstream the project chose only on a trusted host
            project_upstreams={api: project_file for api in project_upstreams if api not in named},
            env_keys=args.env_keys,
            replay=replay,
        )
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    if not 0 <= args.port < 65536:
        raise CliError(f"--port must be between 0 and 65535, not {args.port}", EXIT_USAGE)
    _check_installed()
    if not _is_loopback(args.host):
        print(
            f"openprogram proxy: listening on {args.host}, beyond this machine: anyone who reaches "
            "it can make calls with the keys clients send"
            + (", and with this process's own (--env-keys)" if args.env_keys else "")
            + ", and read what replays serve",
            file=sys.stderr,
        )
    from openprogram.providers.replay import RecordingFileError
    from openprogram.proxy.server import serve

    try:
        # Ctrl-C and SIGTERM are its normal end: serve says what the stop kept (docs/proxy.md).
        return serve(settings, args.host, args.port, announce=lambda line: print(line, flush=True))
    except RecordingFileError as error:
        raise CliError(str(error)) from None
    except OSError as error:
        raise CliError(
            f"cannot listen on {args.host}:{args.port}: {error.strerror or error}"
        ) from None


def _replay_options(args: argparse.Namespace) -> ReplayOptions | None:
    """``--fault``, ``--rechunk`` and ``--pace`` as one ``ReplayOptions`` (None when none is
    given), each checked on its own so that the message names the flag at fault."""
    given = {
        "faults": ("--fault", args.fault),
        "rechunk": ("--rechunk", args.rechunk),
        "pace": ("--pace", args.pace),
    }
    if not any(value for _, value in given.values()):
        return None
    from openprogram.providers.replay import ReplayOptions as Options

    options = Options()
    for name, (flag, value) in given.items():
        try:
            options = options.merged(
                Options.of(**{name: value}, announce=lambda line: print(line, flush=True))
            )
        except ValueError as error:
            raise CliError(f"{flag}: {error}", EXIT_USAGE) from None
    return options


def _project_upstreams() -> tuple[dict[str, str], str]:
    """The project's ``[tool.openprogram.proxy.upstream]`` table (docs/project.md) and its file;
    ``--upstream`` wins over it for the apis it names."""
    from openprogram.project import project_config
    from openprogram.proxy.settings import check_upstream
    from openprogram.state import ConfigError

    try:
        project = project_config()
    except ConfigError as error:
        raise CliError(f"openprogram project configuration: {error}", EXIT_USAGE) from None
    for api, url in project.proxy_upstream.items():
        try:
            check_upstream(api, url)
        except ValueError as error:
            raise CliError(f"{project.where('proxy.upstream')}: {error}", EXIT_USAGE) from None
    return dict(project.proxy_upstream), str(project.path)


def _check_installed() -> None:
    """The server comes with an extra: say how to get it rather than fail on an import."""
    from openprogram.proxy import install_hint, missing_dependencies

    missing = missing_dependencies()
    if missing:
        raise CliError(
            f"openprogram proxy needs {' and '.join(missing)} (its proxy extra): {install_hint()}"
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
