"""MongoDB access: the likeastore collections `networks`, `items` and `users`, and the collector's own `quotas`,
`collectors` and `jobs`. The only code that writes `networks`, `items` and `quotas` (tests/test_architecture.py
checks it).

Only documented pymongo operations. Item uniqueness on (user, type, itemId) comes from the item `_id`, a
12-byte hash of those three fields, so re-collecting is idempotent and costs no extra index on a fresh database;
the unique index on (user, type, itemId) is created as well, so that items written by the original collector
(random `_id`s) are never duplicated either.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC
from typing import Any

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import ConnectionFailure

from ...sdk.redaction import clip
from ...settings import Settings, mask_text
from .accounts import AccountStore
from .filters import (
    BAD_EPOCH,
    DUPLICATE_KEY,
    ITEM_KEY,
    LEASE_DEFAULT,
    LEASE_FIELDS,
    LEASE_SKEW,
    MAX_EPOCH,
    PARK_SECONDS,
    USER_FIELDS,
    DatabaseDown,
    StateWrite,
    claim_query,
    due_query,
    due_range,
    item_key,
    lease_claim,
    lease_free,
    lease_held,
    lease_horizon,
    lease_state,
    not_date,
    not_true,
    odd_modes,
    park,
    runnable,
    state_update,
    unavailable,
    unscheduled,
    unscheduled_due,
    usable_epoch,
)
from .networks import NetworkStore
from .others import IndexRefused, ItemStore
from .sealing import NO_KEYS, Keys

OPERATIONS = (
    "beat",
    "forget_instance",
    "save_quotas",
    "load_quotas",
    "clear_lapsed_leases",
    "bound_rate_limit_waits",
    "bound_quota_blocks",
    "count_due",
    "repair_schedules",
    "odd_modes",
    "park",
    "ensure_indexes",
    "claim",
    "claim_one",
    "renew",
    "release",
    "users_by_email",
    "insert_items",
    "save_tokens",
    "save_state",
    "save_states",
    "pauses",
)
Sink = Callable[[str, float, BaseException | None], None]  # (operation, seconds, the error or None)


def tz_aware(db: Database) -> Database:
    """`db` as one whose datetimes come back timezone-aware in UTC. pymongo's default client returns naive
    datetimes (which are UTC); rather than compare naive with aware deep in the rules, the store reads through a
    tz-aware view of the same database (same client, same connections). mongomock cannot give such a view:
    a mongomock client must be made with tz_aware=True."""
    options = getattr(db, "codec_options", None)
    if options is None or options.tz_aware:
        return db
    if type(db).__module__.startswith("mongomock"):
        raise ValueError("a mongomock database must come from mongomock.MongoClient(tz_aware=True)")
    return db.with_options(codec_options=options.with_options(tz_aware=True, tzinfo=UTC))


class Store(NetworkStore, ItemStore, AccountStore):
    def __init__(self, db: Database, keys: Keys = NO_KEYS):
        db = tz_aware(db)
        self.db = db
        self.keys = keys  # what token writes are sealed with (sealing.py; NO_KEYS: written as given)
        self.mongomock = type(db).__module__.startswith("mongomock")
        self.repaired_at: dict[str, float] = {}
        self.networks = db["networks"]
        self.items = db["items"]
        self.users = db["users"]
        self.quotas = db["quotas"]
        self.collectors = db["collectors"]
        self.control = db["control"]  # the operator's pauses (engine/store/control.py)

    def observe(self, sink: Sink) -> None:
        """Tell `sink` how each database operation went: its name, how long it took, the error it raised. An
        operation made inside another (mongomock's `save_states` through `save_state`) is told once, as the outer
        one. On a thread inside `deferred()` (the claim-ahead thread) the reports are kept for the loop's thread to
        tell (`replay`): the sink and its observers hear from one thread only."""
        local = threading.local()
        self.sink, self.local = sink, local
        for name in OPERATIONS:
            original = getattr(self, name)

            def watched(*args: Any, _original: Callable = original, _name: str = name, **kwargs: Any) -> Any:
                local.depth = getattr(local, "depth", 0) + 1
                started = time.perf_counter()
                error: BaseException | None = None
                try:
                    return _original(*args, **kwargs)
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    local.depth -= 1
                    if not local.depth:
                        kept = getattr(local, "kept", None)
                        if kept is not None:
                            kept.append((_name, time.perf_counter() - started, error))
                        else:
                            sink(_name, time.perf_counter() - started, error)

            setattr(self, name, watched)

    @contextmanager
    def deferred(self) -> Iterator[list[tuple[str, float, BaseException | None]]]:
        """The reports of this thread's operations in the block, kept in the list yielded instead of told."""
        kept: list[tuple[str, float, BaseException | None]] = []
        local = getattr(self, "local", None)
        if local is not None:
            local.kept = kept
        try:
            yield kept
        finally:
            if local is not None:
                local.kept = None

    def replay(self, reports: list[tuple[str, float, BaseException | None]]) -> None:
        """Tell the sink the reports `deferred` kept (on the loop's thread)."""
        sink = getattr(self, "sink", None)
        if sink is not None:
            for report in reports:
                sink(*report)


SELECTION_MS = 10_000  # the daemon's and the sink service's wait for a server, each attempt (systemd restarts them)


def connect(settings: Settings, selection_ms: int = SELECTION_MS) -> MongoClient:
    """The client of the daemon and the operator's tools: tz-aware; the URI's own serverSelectionTimeoutMS wins
    over `selection_ms` (10 s for the daemons; an operator's command waits less: cli/common.py)."""
    options: dict = {"tz_aware": True}
    if "serverselectiontimeoutms" not in settings.mongodb_uri.lower():
        options["serverSelectionTimeoutMS"] = selection_ms
    return MongoClient(settings.mongodb_uri, **options)


def short_error(exc: Exception, settings: Settings) -> str:
    """A driver error in one short line: the server and the reason, without pymongo's topology dump; the URI's
    password masked."""
    text = re.sub(r" \(configured timeouts:[^)]*\)", "", mask_text(str(exc), settings.mongodb_uri))
    return clip(text.split(", Topology Description:")[0], 240)


def database_problem(exc: Exception, settings: Settings, doing: str = "use") -> str:
    """One line: `cannot reach MongoDB at <URI> (MONGODB_URI: where it came from): <why>; <what to do>` when no
    server answered, else `cannot <doing> MongoDB at ...: <why>`; the URI's secrets masked."""
    where = f"MongoDB at {settings.mongodb_shown()}: {short_error(exc, settings)}"
    if not isinstance(exc, ConnectionFailure):
        return f"cannot {doing} {where}"  # it answered: refused the credentials, a command, ...
    if settings.origin("MONGODB_URI").is_default:
        todo = "start MongoDB there, or set MONGODB_URI (in the environment or the settings file)"
    else:
        todo = "check that MongoDB runs there, or correct MONGODB_URI"
    return f"cannot reach {where}; {todo}"


__all__ = [
    "IndexRefused",
    "connect",
    "database_problem",
    "short_error",
    "BAD_EPOCH",
    "DUPLICATE_KEY",
    "ITEM_KEY",
    "LEASE_DEFAULT",
    "LEASE_FIELDS",
    "LEASE_SKEW",
    "MAX_EPOCH",
    "PARK_SECONDS",
    "OPERATIONS",
    "USER_FIELDS",
    "DatabaseDown",
    "StateWrite",
    "Store",
    "claim_query",
    "due_query",
    "due_range",
    "item_key",
    "lease_claim",
    "lease_free",
    "lease_held",
    "lease_horizon",
    "lease_state",
    "not_date",
    "not_true",
    "odd_modes",
    "park",
    "runnable",
    "state_update",
    "tz_aware",
    "unavailable",
    "unscheduled",
    "unscheduled_due",
    "usable_epoch",
]
