"""Typed failures of one network run. The executor maps each class to a state change (see engine/rules.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


class NetworkError(Exception):
    """A failure of one network run. `kind` names the class in lastError; `status` is the HTTP status if any."""

    kind = "error"
    counts_as_error = True
    disables = True  # MAX_ERRORS of them in a row disable the network

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.refreshed: dict = {}  # token fields obtained by a refresh before the failure: saved all the same


class Unauthorized(NetworkError):
    """401, a revoked or expired token: never run again until the app re-authorises."""

    kind = "unauthorized"


class TokenExpired(Unauthorized):
    """The access token expired: a connector that can refresh it does so and retries once."""

    kind = "unauthorized"


class Retired(NetworkError):
    """The service's API is gone: the network is disabled and no request is made."""

    kind = "retired"


class RateLimited(NetworkError):
    """The service's quota is used up; not an error. `reset` is when to come back (None: unknown)."""

    kind = "rateLimit"
    counts_as_error = False

    def __init__(self, message: str, reset: datetime | None = None, status: int | None = None):
        super().__init__(message, status)
        self.reset = reset


class Transient(NetworkError):
    """5xx, timeouts, connection errors: retried with exponential backoff."""

    kind = "transient"


class BadResponse(NetworkError):
    """Another 4xx, or a body that is not what the API documents."""

    kind = "badResponse"


class Malformed(NetworkError):
    """The network document itself is unusable (missing token, wrong field types)."""

    kind = "malformed"


class NotConfigured(NetworkError):
    """A setting the connector needs (an app key, a client id) is missing."""

    kind = "notConfigured"


class Sealed(Transient):
    """A token sealed at rest that the collector's keys cannot open (TOKEN_KEY unset or another, TOKEN_KEYS_OLD
    without the old one, a damaged value): the collector's configuration more than the network's fault, so it
    backs off as a transient error does and never disables the network."""

    kind = "sealed"
    disables = False


class UnknownService(NetworkError):
    kind = "unknownService"


class Interrupted(NetworkError):
    """The collector is stopping and cut the run short: not the network's fault. Its state is left as it was
    (it runs again as soon as a collector takes it); only tokens a refresh obtained are saved."""

    kind = "interrupted"
    counts_as_error = False


class OutOfDescriptors(Interrupted):
    """The collector itself ran out of file descriptors (EMFILE/ENFILE) while running the network: the
    collector's trouble, never the network's. Like a stop, the network is left as it was; the collector waits a
    little, logs it and says so in /readyz."""


def exhausted(exc: BaseException | None) -> bool:
    """Whether `exc`, or an error it was raised from, says this process (or the system) has no file descriptor
    left."""
    import errno

    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return True
        if "Too many open files" in str(exc)[:2000]:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


@dataclass(frozen=True)
class Quota:
    """Rate-limit facts from the last response of a run."""

    remaining: int | None = None
    limit: int | None = None
    reset: datetime | None = None

    def exhausted(self, threshold: int = 1) -> bool:
        """remaining <= threshold: stop and wait for the reset, keeping one request in hand."""
        return self.remaining is not None and self.remaining <= threshold


def redact(text: str, secrets) -> str:
    """`text` with every secret value replaced by '***'."""
    for secret in secrets:
        if secret and isinstance(secret, str) and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
