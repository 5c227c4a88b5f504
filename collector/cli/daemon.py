"""The daemon's flags on the top-level parser: `--mode` serves a mode (daemon/process.py `serve`), `--once` one
pass of it; `--check-config` prints the settings, whatever else is given; `--concurrency`, `--services` and
`--instance-id` shape the collector (bench reads `--concurrency` too). With no command, the daemon runs."""

from __future__ import annotations

import argparse
import functools
import json
import socket
import sys
from collections.abc import Iterable

from ..exitcodes import EXIT_USAGE
from ..modes import MODES
from ..settings import MAX_CONCURRENCY, Settings
from ..settings.model import DEFAULT
from ..textout import printable


def mode_arg(text: str) -> tuple[str, str]:
    """`initial`, `normal`, or one of them with a `-N` suffix (several collectors of one mode on one host)."""
    mode, _, suffix = text.partition("-")
    if mode not in MODES or (_ and not suffix.isalnum()):
        raise argparse.ArgumentTypeError(f"invalid mode {text!r}: give initial or normal, optionally with -N")
    return mode, suffix


def services_arg(text: str) -> tuple[str, ...]:
    from ..settings import _names

    try:
        return _names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(parser: argparse.ArgumentParser) -> None:
    """The daemon's flags, on the top-level parser itself; its handler is the default one (no command given)."""
    parser.add_argument(
        "--mode",
        type=mode_arg,
        metavar="{initial,normal}[-N]",
        help="serve this mode ('initial' also serves rateLimit networks); a suffix names one of several "
        "collectors of the mode on this host (normal-2: instance id HOST-normal-2), as systemd's collector@normal-2",
    )
    parser.add_argument("--once", action="store_true", help="run one pass, then exit")
    parser.add_argument(
        "--check-config", action="store_true", help="validate the settings, print them (secrets masked) and exit"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests out at once, 1 to 4096, with up to twice as many networks held (default: the CONCURRENCY "
        "setting, 16; 1 runs networks in series)",
    )
    parser.add_argument(
        "--services",
        type=services_arg,
        default=None,
        metavar="NAME[,NAME...]",
        help="claim only these services' networks (default: the SERVICES setting; empty: every service)",
    )
    parser.add_argument(
        "--instance-id", default=None, help="this collector's name in network leases (default: host name and pid)"
    )
    parser.set_defaults(handler=functools.partial(serve, parser))


def check_config(settings: Settings) -> int:
    """`--check-config`: the settings as the daemon would use them, as JSON on standard output, secrets masked (a
    sink kind's secret options too, whatever their names); on standard error, which were set and where (the
    operator's settings file, the environment, ./.env) and which are defaults. Settings the daemon or the sink
    service would refuse never get here: loading them refused them (exit 2)."""
    from ..sinks.config import secret_names
    from ..sinks.registry import SinkRegistry

    described = settings.describe(secret_names=secret_names(settings, SinkRegistry()))
    print(json.dumps(described, indent=2))
    for line in origin_lines(settings, described):
        print(f"collector: {line}", file=sys.stderr)
    return 0


def origin_lines(settings: Settings, names: Iterable[str]) -> list[str]:
    """Where the settings `names` came from, one line per place, what was set first; then the verdict."""
    lines: list[str] = []
    for origin, group in settings.by_origin(names).items():
        if origin == DEFAULT:  # the longest list and the least telling: counted, not named
            lines.append(f"{origin}: every other one ({len(group)} settings)" if len(lines) else f"{origin}: all")
        else:
            lines.append(f"{origin}: {', '.join(printable(name) for name in group)}")
    return [*lines, "the settings are valid: the daemon and the sink service accept them"]


def serve(parser: argparse.ArgumentParser, args: argparse.Namespace, settings: Settings) -> int:
    """`collector --mode initial|normal[-N] [--once]`: the daemon, until a signal (or one pass)."""
    if args.mode is None:
        parser.print_usage(sys.stderr)
        print(
            "collector: give --mode initial|normal, --check-config or a command "
            "(demo, status, monitor, sink, sinks, healthcheck, pause, resume, jobs, networks, connectors, bench)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.concurrency is not None and not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"--concurrency must be from 1 to {MAX_CONCURRENCY}")
    from ..daemon.logs import setup_logging
    from ..daemon.process import serve as serve_daemon

    setup_logging(settings.log_level, settings.log_format)
    mode, suffix = args.mode
    instance_id = args.instance_id or (f"{socket.gethostname()}-{mode}-{suffix}" if suffix else None)
    return serve_daemon(settings, mode, args.once, args.concurrency, instance_id, args.env_file, args.services)
