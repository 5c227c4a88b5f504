"""`collector healthcheck`: this instance's own /healthz (or /readyz) on METRICS_ADDR:METRICS_PORT, for container
health checks without curl; exit 0 healthy, 1 not."""

from __future__ import annotations

import argparse

from ..exitcodes import EXIT_NO, EXIT_OK
from ..settings import Settings
from .common import Commands, complain, printable, seconds_arg


def register(commands: Commands) -> None:
    health = commands.add_parser(
        "healthcheck",
        description="Ask this instance's own /healthz (or /readyz): exit 0 healthy, 1 not.",
        help="ask this instance's own /healthz (or /readyz) on METRICS_ADDR:METRICS_PORT; exit 0 healthy, 1 not "
        "(for container health checks without curl)",
    )
    health.add_argument("--ready", action="store_true", help="ask /readyz (MongoDB answers) instead of /healthz")
    health.add_argument("--timeout", type=seconds_arg, default=5.0, help="seconds to wait for the answer (5)")
    health.set_defaults(handler=run)


def endpoint(addr: str, port: int, ready: bool) -> str:
    """The URL this host reaches its own endpoint at (a wildcard address: the loopback of its family)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(addr, addr)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/{'readyz' if ready else 'healthz'}"


def run(args: argparse.Namespace, settings: Settings) -> int:
    import urllib.error
    import urllib.request

    if not settings.metrics_port:
        complain("METRICS_PORT is not set, so this instance serves no health endpoint")
        return EXIT_NO
    url = endpoint(settings.metrics_addr, settings.metrics_port, args.ready)
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as reply:
            code, body = reply.status, reply.read(1024)
    except urllib.error.HTTPError as error:
        code, body = error.code, error.read(1024)
    except (OSError, ValueError) as exc:
        print(f"unhealthy: {url} did not answer ({getattr(exc, 'reason', None) or exc})")
        return EXIT_NO
    print(("healthy: " if code == 200 else "unhealthy: ") + printable(body.decode("utf-8", "replace").strip()))
    return EXIT_OK if code == 200 else EXIT_NO
