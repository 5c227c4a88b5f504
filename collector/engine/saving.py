"""Saving: everything after a result exists — tokens a refresh obtained, the items of every finished run in one
batch, the users they belong to, every state in one batch of fenced writes, the quota facts learnt — and the only
place a result is amended after the database spoke (items it refused, a state it could not keep).

Runs on the dispatch loop's thread only: the database is used from one thread, whatever the driver's thread
safety. A document the database refuses is that network's problem alone; a database that cannot be reached
raises DatabaseDown with the progress kept on each Saving, for a retry.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..sdk.errors import BadResponse
from ..sdk.redaction import clip
from ..settings import Settings
from . import rules
from .decide import failure
from .events import Saved
from .loglimit import Throttle
from .quota import QuotaSharing
from .rules import Update
from .run import Attempt, RunResult, stored_items
from .store import DUPLICATE_KEY, DatabaseDown, StateWrite, Store, unavailable
from .store.sealing import NO_KEYS, Keys, reseal_plan, stored_value

log = logging.getLogger("collector.engine")


class Saving:
    """The save of one RunResult in progress, so that a database hiccup retries only what is missing. The result
    itself stays whole; when the database refuses some of its items or its state, a new result replaces it."""

    def __init__(self, result: RunResult):
        self.result = result
        self.docs: list[dict] | None = None
        self.duplicates = 0
        self.new_items = 0
        self.tokens_saved = not result.tokens
        self.items_saved = False
        self.state_saved = False
        self.accepted = False  # the state write matched our lease epoch

    @property
    def network(self) -> Mapping[str, Any]:
        return self.result.network

    def outcome(self, dropped: bool = False) -> Saved:
        return Saved(self.new_items, self.accepted or dropped, dropped)


class Saver:
    """Saves batches of Savings through the store; `settings` follows a reload (Collector.apply_settings)."""

    def __init__(self, store: Store, settings: Settings, rng: random.Random, sharing: QuotaSharing, throttle: Throttle):
        self.store, self.settings, self.rng, self.sharing, self.throttle = store, settings, rng, sharing, throttle

    def persist(self, batch: list[Saving], users: dict) -> None:
        """Save what `batch` still needs, in this order: tokens a refresh obtained (on their own, so a failure
        below cannot lose them), the items of every run in one batch, then every state in one batch of fenced
        updates. Items before state: a crash in between re-collects (harmlessly) rather than loses.

        A document the database refuses is that network's problem alone (reported on it); a database that
        cannot be reached raises DatabaseDown with the progress kept on each Saving, for a retry."""
        for saving in batch:
            if not saving.tokens_saved:
                self._guard(
                    self.store.save_tokens,
                    saving.network["_id"],
                    dict(saving.result.tokens),
                    stored_value(saving.network, "refreshToken"),
                )
                saving.tokens_saved = True
        self.insert_items([s for s in batch if not s.items_saved], users)
        pending = [s for s in batch if not s.state_saved]
        outcomes = self._guard(self.store.save_states, [state_write(s.result, self.store.keys) for s in pending])
        for saving, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, Exception):
                self.save_error_instead(saving, outcome)
            else:
                saving.accepted = outcome
            self.state_written(saving)
        self.sharing.share()

    def look_up_users(self, batch: list[Saving], users: dict[Any, dict | None]) -> None:
        """Add to `users` (a cache: None for a user not found) the users of the runs in `batch` that have items
        to store: one query per save batch, none for runs that found nothing new (most polls)."""
        missing = {s.network.get("user") for s in batch if s.docs is None and s.result.items and s.network.get("user")}
        missing = {u for u in missing if isinstance(u, str) and u not in users}
        if not missing:
            return
        try:
            found = self._guard(self.store.users_by_email, missing)
        except DatabaseDown:
            raise
        except Exception as exc:  # the items matter more than their userData
            self.throttle.trouble(
                "users", "looking up %d users failed (%s); items saved without userData", len(missing), exc
            )
            return
        users.update({email: found.get(email) for email in missing})

    def insert_items(self, batch: list[Saving], users: dict) -> None:
        self.look_up_users(batch, users)
        docs: list[dict] = []
        owners: list[Saving] = []
        for saving in batch:
            if saving.docs is None:
                user = saving.network.get("user")
                if saving.result.items and users.get(user) is None:
                    log.warning(
                        "user %r of network %s not found in users: items saved without userData",
                        user,
                        saving.network.get("_id"),
                    )
                saving.docs = stored_items(saving.result, users.get(user)) if saving.result.items else []
            docs.extend(saving.docs)
            owners.extend([saving] * len(saving.docs))
            saving.duplicates = 0
        errors = self._guard(self.store.insert_items, docs) if docs else []
        refused: dict[int, list[tuple[str, str]]] = {}
        for index, code, message in errors:
            owner = owners[index]
            if code == DUPLICATE_KEY:
                owner.duplicates += 1
            else:
                refused.setdefault(id(owner), []).append((str(docs[index].get("itemId")), message))
        for saving in batch:
            bad = refused.get(id(saving), [])
            if bad:
                log.warning(
                    "network %s: %d items refused by the database, first %r: %s",
                    saving.network.get("_id"),
                    len(bad),
                    clip(bad[0][0], 80),
                    clip(bad[0][1], 200),
                )
                saving.result = refused_by_database(saving.result, bad)
            saving.new_items = len(saving.docs or []) - saving.duplicates - len(bad)
            saving.items_saved = True

    def save_error_instead(self, saving: Saving, exc: Exception) -> None:
        """The database refused this state (a value the API gave): record that error on the network instead."""
        result, network = saving.result, saving.network
        reason = f"{type(exc).__name__}: {clip(exc, 200)}"
        log.error("network %s: state cannot be stored (%s); recording the error instead", network.get("_id"), reason)
        attempt = Attempt(network, result.mode, result.at, self.rng.random(), result.held)
        failed = failure(attempt, BadResponse(f"state could not be stored: {reason}"), self.settings)
        saving.result = result = replace(
            result, error=failed.error, update=Update({**failed.update.values, **result.tokens})
        )
        try:
            saving.accepted = self._guard(self.store.save_state, *state_write(result, self.store.keys))
        except DatabaseDown:
            raise
        except Exception as again:
            log.error(
                "network %s: even the error record cannot be stored (%s); its lease will lapse",
                network.get("_id"),
                type(again).__name__,
            )

    def state_written(self, saving: Saving) -> None:
        network = saving.network
        saving.state_saved = True
        if not saving.accepted:
            log.warning("network %s: lease lost to another collector, state not saved (items kept)", network.get("_id"))

    @staticmethod
    def _guard(call: Callable, *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as exc:
            if unavailable(exc):
                raise DatabaseDown(f"{type(exc).__name__}: {clip(exc, 200)}") from exc
            raise


def state_write(result: RunResult, keys: Keys = NO_KEYS) -> StateWrite:
    """The store's write of a result's state; with it, tokens read plain or sealed with an old key are sealed with
    TOKEN_KEY (sealing.reseal_plan)."""
    network = result.network
    write = (network["_id"], dict(result.update.values), result.update.unset, network.get("leaseEpoch"))
    plan = reseal_plan(network, keys)
    return (*write, plan) if plan else write


def refused_by_database(result: RunResult, refused: list[tuple[str, str]]) -> RunResult:
    """The result, with items the database refused named on the network (see schedule.with_skips)."""
    if result.error is not None:
        return result
    all_refused = (*result.refused, *refused)
    skipped = result.skipped + len(refused)
    reason = result.skip_reason or f"refused by the database: {clip(refused[0][1], 160)}"
    update = rules.with_skips(result.update, result.network, skipped, reason, all_refused, result.at)
    return replace(result, update=update, refused=all_refused, skipped=skipped, skip_reason=reason)
