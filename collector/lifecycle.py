"""One process lifecycle for the three long-running processes — the collector (daemon/process.py), the sink service
(daemon/sinkprocess.py) and the monitor (monitor/serve.py): signals, reload, systemd's notify protocol, health.

- Signals: `Lifecycle.installed()` puts its handlers on SIGTERM, SIGINT and SIGHUP and gives back the ones it found
  when the block ends (a process run inside a longer-lived program leaves its signals alone). The first SIGTERM or
  SIGINT asks for a graceful stop (the process's own `on_stop` hook, then `stopping`, STOPPING=1); a second one
  ends the process at once, 128 + the signal (`exit_if_second`). SIGHUP asks for a reload, applied by the
  process's own loop at its next round (`reload_wanted`). `StartupSignals` holds the time before that.
- Reload: `reload()` reads the settings again; a file that cannot be read, or a bad setting (the process's own
  `check`, then its `apply`, may refuse), keeps every old setting, said in one line. What cannot change while a
  process runs (`FIXED`) is kept until a restart, said in one line (`merge`, pure).
- Notify: `Notifier`, READY=1 / WATCHDOG=1 / STATUS= / STOPPING=1 over NOTIFY_SOCKET (a no-op without it).
- Health: each process gives a typed status (`HealthStatus`: liveness and readiness, each a verdict and its
  reason); `health_answer` routes /healthz and /readyz to it, `health_routes` in front of a WSGI app.

The kernel: it imports only the settings, so the collector, the sink service and the monitor use it alike.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from typing import Any, Protocol

from .settings import SCHEMA, Settings, SettingsError

log = logging.getLogger("collector.lifecycle")

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOPS = (signal.SIGTERM, signal.SIGINT)

# what a running process cannot change: its database connection, its metrics socket, its environment files, the
# monitor's socket and token, the certificate authorities its clients trust, the keys that seal tokens
FIXED = (
    "env",
    "mongodb_uri",
    "ca_bundle",
    "metrics_port",
    "metrics_addr",
    "monitor_host",
    "monitor_port",
    "monitor_token",
    "token_key",
    "token_key_file",
    "token_keys_old",
)
ENV_NAMES = {attr: env for env, attr, _ in SCHEMA} | {"env": "COLLECTOR_ENV"}
NOT_COMPARED = ("raw", "file_keys", "sources", "origins")
LOGGING = {"LOG_LEVEL", "LOG_FORMAT"}


# --- signals -----------------------------------------------------------------------------------------------------
def exit_if_second(count: int, signum: int) -> None:
    """The second stop signal (`count` 2 or more) ends the process at once, 128 + the signal, waiting for nothing."""
    if count > 1:
        sys.stderr.write(f"collector: second {signal.Signals(signum).name}, exiting now\n")
        sys.stderr.flush()
        os._exit(128 + signum)


@contextlib.contextmanager
def restored_signals(signals: tuple[int, ...] = HANDLED) -> Iterator[None]:
    """The handlers of `signals` as they were before, put back when the block ends (as uvicorn's
    `capture_signals`): a process run inside a longer-lived program (tests, an embedding) leaves its signals alone."""
    before = {signum: signal.getsignal(signum) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


# The cyclic garbage collector's youngest generation in the collector's daemon: collected every GC_YOUNG net
# allocations of container objects, not Python's 700. A poll makes and frees a few hundred objects, nearly all freed
# by their reference counts; yet the count's swings between the batches of runs crossed 700 every ~25 polls, and
# each crossing walked every young object alive (measured: 11-20 µs of CPU a poll at 64-256 in flight, 5-9% of the
# engine's; at 5,000, 9 collections in 6,300 polls). The cycles that do become garbage are found at most GC_YOUNG
# allocations later; the older generations keep their thresholds.
GC_YOUNG = 5000


@contextlib.contextmanager
def gc_spaced(young: int = GC_YOUNG) -> Iterator[None]:
    """The collector's garbage-collection thresholds (GC_YOUNG) for the block, those found put back when it ends (a
    process run inside a longer-lived program leaves them as it found them)."""
    found = gc.get_threshold()
    gc.set_threshold(young, *found[1:])
    try:
        yield
    finally:
        gc.set_threshold(*found)


class StopDuringStartup(Exception):
    """SIGTERM or SIGINT arrived before the process was ready (MongoDB slow to answer, indexes being built)."""


class StartupSignals:
    """The handlers from the first line of a process until its lifecycle's own are installed: a SIGHUP is
    remembered (and applied at the loop's first round), a SIGTERM or SIGINT ends the start-up at once, so no signal
    an operator or systemd sends while MongoDB is slow to answer kills the process with a traceback."""

    def __init__(self) -> None:
        self.hangup = False

    def install(self) -> StartupSignals:
        signal.signal(signal.SIGHUP, self.on_hangup)
        signal.signal(signal.SIGTERM, self.on_stop)
        signal.signal(signal.SIGINT, self.on_stop)
        return self

    def on_hangup(self, signum: int, frame: object = None) -> None:
        self.hangup = True

    def on_stop(self, signum: int, frame: object = None) -> None:
        raise StopDuringStartup(signal.Signals(signum).name)


# --- systemd's notify protocol -------------------------------------------------------------------------------------
class Notifier:
    """Datagrams to NOTIFY_SOCKET (an abstract socket when it starts with @); without it every call is a no-op."""

    def __init__(self, address: str | None = None):
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self.address = "\0" + address[1:] if address.startswith("@") else address  # abstract namespace

    def send(self, *fields: str) -> bool:
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto("\n".join(fields).encode(), self.address)
            return True
        except OSError:
            return False


# --- the lifecycle -------------------------------------------------------------------------------------------------
class Lifecycle:
    """One process's stop, reload and notify state. `on_stop(signum)`: the process's own first-signal work (its log
    line, cutting what runs), called before `stopping` is set; `wakeup`: the event its loop waits on between
    rounds (a stop or a reload ends the wait); `on_reload`: called once a SIGHUP set `reload_wanted`, for a loop
    that does not wait on `wakeup` (the monitor's asyncio loop, whose handlers run on the loop itself)."""

    def __init__(
        self,
        on_stop: Callable[[int], object] | None = None,
        wakeup: threading.Event | None = None,
        notifier: Notifier | None = None,
        on_reload: Callable[[], object] | None = None,
    ):
        self.on_stop, self.on_reload = on_stop, on_reload
        self.stopping = threading.Event()
        self.wakeup = wakeup if wakeup is not None else threading.Event()
        self.notifier = notifier if notifier is not None else Notifier()
        self.signals = 0
        self.reload_wanted = False

    def install(self, loop: Any = None) -> dict[int, Any]:
        """Its handlers on SIGTERM, SIGINT and SIGHUP (through an asyncio `loop`, when given, so the loop wakes up);
        returns the handlers it found, for `restore`."""
        found: dict[int, Any] = {signum: signal.getsignal(signum) for signum in HANDLED}
        for signum in HANDLED:
            handler = self.on_hangup if signum == signal.SIGHUP else self.on_signal
            if loop is not None:
                loop.add_signal_handler(signum, handler, signum)
            else:
                signal.signal(signum, handler)
        return found

    def restore(self, found: dict[int, Any], loop: Any = None) -> None:
        """The handlers `install` found, given back."""
        for signum, handler in found.items():
            if loop is not None:
                loop.remove_signal_handler(signum)
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    @contextlib.contextmanager
    def installed(self, loop: Any = None, early: StartupSignals | None = None) -> Iterator[Lifecycle]:
        """Its handlers for the block. `early`: the start-up's handlers, replaced here; a SIGHUP they caught asks
        for a reload. Read once this lifecycle's handlers are in place, so that a SIGHUP arriving at any moment
        lands in one of the two and is never lost."""
        found = self.install(loop)
        if early is not None and early.hangup:
            self.reload_wanted = True
        try:
            yield self
        finally:
            self.restore(found, loop)

    def on_signal(self, signum: int, frame: object = None) -> None:
        """SIGTERM or SIGINT: the first asks for a graceful stop, a second ends the process at once."""
        self.signals += 1
        exit_if_second(self.signals, signum)
        if self.on_stop is not None:
            self.on_stop(signum)
        self.stopping.set()
        self.wakeup.set()
        self.notifier.send("STOPPING=1")

    def on_hangup(self, signum: int = signal.SIGHUP, frame: object = None) -> None:
        """SIGHUP: a reload, applied by the process's loop at its next round (never inside the handler)."""
        self.reload_wanted = True
        self.wakeup.set()
        if self.on_reload is not None:
            self.on_reload()

    def ready(self, status: str) -> None:
        self.notifier.send("READY=1", status)

    def alive(self, status: str) -> None:
        """The loop went round: the watchdog fed, STATUS= up to date."""
        self.notifier.send("WATCHDOG=1", status)

    def reload(self, reloading: Reloading) -> list[str]:
        """The reload a SIGHUP asked for (see `reload`): the flag cleared whatever the outcome."""
        self.reload_wanted = False
        return reload(reloading)


# --- reload ----------------------------------------------------------------------------------------------------------
def changed(old: Settings, new: Settings) -> list[str]:
    """Names (as in the environment) of the settings that differ."""
    return [
        ENV_NAMES.get(f.name, f.name.upper())
        for f in fields(Settings)
        if f.name not in NOT_COMPARED and getattr(old, f.name) != getattr(new, f.name)
    ]


def merge(old: Settings, new: Settings) -> tuple[Settings, list[str]]:
    """The settings to apply, and the names of those that changed but are kept as they were until a restart."""
    kept = [name for name in FIXED if getattr(old, name) != getattr(new, name)]
    return new.with_(**{name: getattr(old, name) for name in kept}), [ENV_NAMES[name] for name in kept]


class Reloading(Protocol):
    """What a process gives its reload: its settings now, how to read them again, the one check of new settings
    (SettingsError refuses them), how to apply them (SettingsError refuses them, nothing changed), how a refusal is
    said (one line) and at which level, and the logging to set up again when LOG_LEVEL or LOG_FORMAT change."""

    @property
    def settings(self) -> Settings: ...

    def read_settings(self) -> Settings: ...

    def check_settings(self, new: Settings) -> None: ...

    def apply_settings(self, merged: Settings) -> None: ...

    def refusal(self, exc: SettingsError) -> tuple[int, str]: ...

    def reconfigure_logging(self, settings: Settings) -> None: ...


def reload(process: Reloading) -> list[str]:
    """Read the settings again and apply what may change while running; returns the names applied. A settings file
    that cannot be read or a bad setting keeps every old setting (one line naming it); a process never stops over
    a reload."""
    old = process.settings
    try:
        new = process.read_settings()
        process.check_settings(new)
    except SettingsError as exc:
        return refused(process, exc)
    merged, kept = merge(old, new)
    if kept:
        log.warning("reload: %s cannot change while running; kept until a restart", ", ".join(kept))
    try:
        process.apply_settings(merged)
    except SettingsError as exc:
        return refused(process, exc)
    applied = changed(old, merged)
    if LOGGING & set(applied):
        process.reconfigure_logging(merged)
    log.info(
        "reload: %s (read %s)",
        "applied " + ", ".join(applied) if applied else "no change",
        ", ".join(merged.sources) or "nothing",
    )
    return applied


def refused(process: Reloading, exc: SettingsError) -> list[str]:
    level, line = process.refusal(exc)
    log.log(level, "reload refused, settings unchanged: %s", line)
    return []


# --- health --------------------------------------------------------------------------------------------------------
class HealthStatus(Protocol):
    """What /healthz (liveness: does the loop go round) and /readyz (readiness: can it do its work now) answer:
    a verdict and its reason, one line."""

    def health(self) -> tuple[bool, str]: ...

    def readiness(self) -> tuple[bool, str]: ...


HEALTH_PATHS: dict[str, Callable[[HealthStatus], tuple[bool, str]]] = {
    "/healthz": lambda status: status.health(),
    "/readyz": lambda status: status.readiness(),
}


def health_answer(status: HealthStatus, path: str) -> tuple[int, bytes] | None:
    """The answer to a health path (status code, body), None for any other path."""
    check = HEALTH_PATHS.get(path)
    if check is None:
        return None
    healthy, reason = check(status)
    return (200 if healthy else 503), reason.encode() + b"\n"


WsgiApp = Callable[[dict, Callable], Iterable[bytes]]


def health_routes(status: HealthStatus, other: WsgiApp) -> WsgiApp:
    """A WSGI app: /healthz and /readyz from `status`, anything else from `other`."""

    def serve(environ: dict, start_response: Callable) -> Iterable[bytes]:
        answer = health_answer(status, environ.get("PATH_INFO", ""))
        if answer is None:
            return other(environ, start_response)
        code, body = answer
        start_response(
            "200 OK" if code == 200 else "503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")]
        )
        return [body]

    return serve
