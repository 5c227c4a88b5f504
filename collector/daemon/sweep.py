"""The inactive-user sweep: no quota for users who left, and a quick return for those who come back.

Networks of users whose `users.loginLastDate` is missing or older than INACTIVE_DAYS get `skip: true,
skipReason: "inactive"` (the date is read in every form the web app may have stored, logindates.py; one that
cannot be read counts as active); a user who logged in since gets those networks back, scheduled now (the original
collector disabled them for good). Users are read through one cursor in batches, never all at once. Only
networks whose user has a document in `users` are judged: a network of an unknown user is left alone.

Once a day (INACTIVE_SWEEP_CRON, UTC: an APScheduler cron job, see jobs.py) in the `initial` collector; several
collectors race for a lease document in `jobs` and one wins per day. The sweep runs on the dispatch loop's
thread, like every database access.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from pymongo.errors import DuplicateKeyError

from ..engine.store import Store
from ..sdk.redaction import clip
from ..settings import Settings
from ..textout import printable
from .logindates import UNREADABLE, login_date

log = logging.getLogger("collector.sweep")
JOB_ID = "inactive-sweep"
BATCH = 500
REASON = "inactive"
RETRY = timedelta(minutes=5)


def claim_day(db: Any, now: datetime, owner: str) -> bool:
    """True for the one collector that takes today's sweep."""
    day = now.strftime("%Y-%m-%d")
    try:
        result = db.jobs.update_one(
            {"_id": JOB_ID, "day": {"$ne": day}},
            {"$set": {"day": day, "owner": owner, "startedAt": now}},
            upsert=True,
        )
    except DuplicateKeyError:  # another collector upserted today's document first
        return False
    return bool(result.modified_count or result.upserted_id is not None)


def sweep(db: Any, now: datetime, days: int, batch: int = BATCH, dry_run: bool = False) -> dict[str, Any]:
    """Skip the networks of inactive users, revive those of users who are back. Returns the counts.

    Users come from one cursor sorted by email and read `batch` at a time, so memory stays bounded and every
    `users` document of one email is seen together, wherever the batches fall: the most recent login among
    them decides. A date that cannot be read counts as active (logged once per sweep, with how many)."""
    store = db if isinstance(db, Store) else Store(db)  # the store writes `networks`; users are read here
    db = store.db
    cutoff = now - timedelta(days=days)
    counts = {"users": 0, "skipped": 0, "revived": 0, "unreadable": 0}
    cursor = db.users.find({}, {"email": 1, "loginLastDate": 1}, allow_disk_use=True).sort("email", 1)
    verdicts: list[tuple[str, bool]] = []  # (email, active), flushed `batch` at a time
    example: Any = None
    try:
        for email, dates in by_email(cursor.batch_size(batch), counts):
            readable = [d for d in dates if isinstance(d, datetime)]
            if any(d is UNREADABLE for d in dates) and not any(d >= cutoff for d in readable):
                counts["unreadable"] += 1
                example = example or email
                verdicts.append((email, True))
            else:
                verdicts.append((email, any(d >= cutoff for d in readable)))
            if len(verdicts) >= batch:
                apply(store, verdicts, now, counts, dry_run)
                verdicts = []
        apply(store, verdicts, now, counts, dry_run)
    finally:
        cursor.close()
    if counts["unreadable"]:
        log.warning(
            "inactive sweep: %d users have a loginLastDate that cannot be read (e.g. %s); counted as active",
            counts["unreadable"],
            printable(clip(example, 80)),
        )
    return counts


def by_email(cursor: Any, counts: dict[str, int]) -> Iterator[tuple[str, list[Any]]]:
    """(email, every login date of its documents) for each email of a cursor sorted by email."""
    current: str | None = None
    dates: list[Any] = []
    for user in cursor:
        counts["users"] += 1
        email = user.get("email")
        if not isinstance(email, str):
            continue
        if email != current:
            if current is not None:
                yield current, dates
            current, dates = email, []
        dates.append(login_date(user.get("loginLastDate")))
    if current is not None:
        yield current, dates


def apply(
    store: Store, verdicts: list[tuple[str, bool]], now: datetime, counts: dict[str, Any], dry_run: bool = False
) -> None:
    inactive = [email for email, active in verdicts if not active]
    active = [email for email, active in verdicts if active]
    if dry_run:  # what would change, read only: users whose networks would be skipped or revived
        skip = store.networks.distinct("user", {"user": {"$in": inactive}, "skip": {"$ne": True}}) if inactive else []
        back = store.networks.distinct("user", {"user": {"$in": active}, "skip": True, "skipReason": REASON})
        for key, found in (("wouldSkip", skip), ("wouldRevive", back if active else [])):
            counts.setdefault(key, [])
            counts[key] += [u for u in found if isinstance(u, str)][: max(100 - len(counts[key]), 0)]
        return
    if inactive:
        counts["skipped"] += store.skip_inactive(inactive, REASON)
    if active:
        counts["revived"] += store.revive(active, REASON, now)


class InactiveSweep:
    """The sweep as a job (`__call__(now)`, run by the daemon's cron job on the dispatch loop's thread): take
    today's lease, sweep, log the counts. `settings()` gives the current INACTIVE_DAYS (a reload may change it).
    A failure gives the day back, asks `retry` for another try in RETRY, and raises (the job is counted failed)."""

    def __init__(self, db: Any, owner: str, settings: Callable[[], Settings], retry: Callable[[datetime], object]):
        self.db, self.owner, self.settings, self.retry = db, owner, settings, retry

    def __call__(self, now: datetime) -> dict[str, int] | None:
        days = self.settings().inactive_days
        if days <= 0:
            return None
        if not claim_day(self.db, now, self.owner):
            log.info("inactive sweep: another collector has today's")
            return None
        try:
            counts = sweep(self.db, now, days)
        except Exception:
            # give the day back and try again in a few minutes: a database hiccup delays the sweep, no more
            try:
                self.db.jobs.update_one({"_id": JOB_ID, "owner": self.owner}, {"$set": {"day": None}})
            except Exception:
                log.warning("inactive sweep: could not give today's lease back")
            self.retry(now + RETRY)
            raise
        log.info(
            "inactive sweep: %d users read, %d networks skipped as inactive, %d revived",
            counts["users"],
            counts["skipped"],
            counts["revived"],
        )
        return counts


def run_now(db: Any, settings: Settings, now: datetime, owner: str, dry_run: bool, force: bool) -> list[str]:
    """`collector jobs run inactive-sweep`: the sweep now, from the command line, under the same once-a-day
    lease as the daemon's cron job (`force`: take today's lease even if a collector swept today). A dry run
    takes no lease and writes nothing: it says which users' networks would be skipped or revived."""
    days = settings.inactive_days
    if days <= 0:
        return ["inactive sweep is off (INACTIVE_DAYS=0)"]
    if not dry_run:
        if force:
            db.jobs.update_one(
                {"_id": JOB_ID},
                {"$set": {"day": now.strftime("%Y-%m-%d"), "owner": owner, "startedAt": now}},
                upsert=True,
            )
        elif not claim_day(db, now, owner):
            return ["inactive sweep: already run today (by a collector or by hand); --force runs it again"]
    counts = sweep(db, now, days, dry_run=dry_run)
    if dry_run:
        lines = [
            f"inactive sweep (dry run, INACTIVE_DAYS={days}): {counts['users']} users read, "
            f"{len(counts.get('wouldSkip', []))} users' networks would be skipped, "
            f"{len(counts.get('wouldRevive', []))} revived; {counts['unreadable']} login dates unreadable (active)"
        ]
        lines += [f"  would skip: {printable(clip(u, 80))}" for u in counts.get("wouldSkip", [])[:20]]
        lines += [f"  would revive: {printable(clip(u, 80))}" for u in counts.get("wouldRevive", [])[:20]]
        return lines
    return [
        f"inactive sweep: {counts['users']} users read, {counts['skipped']} networks skipped as inactive, "
        f"{counts['revived']} revived; {counts['unreadable']} login dates unreadable (counted as active)"
    ]
