"""The inactive-user sweep: no quota for users who left, and a quick return for those who come back.

Networks of users whose `users.loginLastDate` is missing or older than INACTIVE_DAYS get `skip: true,
skipReason: "inactive"`; a user who logged in since gets those networks back, scheduled now (the original
collector disabled them for good). Users are read through one cursor in batches, never all at once. Only
networks whose user has a document in `users` are judged: a network of an unknown user is left alone.

Once a day (INACTIVE_SWEEP_CRON, UTC: an APScheduler cron job, see jobs.py) in the `initial` collector; several
collectors race for a lease document in `jobs` and one wins per day. The sweep runs on the dispatch loop's
thread, like every database access.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from pymongo.errors import DuplicateKeyError

from .sdk.timeutil import parse_iso
from .settings import Settings

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


def sweep(db: Any, now: datetime, days: int, batch: int = BATCH) -> dict[str, int]:
    """Skip the networks of inactive users, revive those of users who are back. Returns the counts.

    Users come from one cursor read `batch` at a time (the server sends them in batches too), so memory stays
    bounded and every user is seen whatever the type of its `_id` (paging by `_id > last` would skip the ids of
    another BSON type)."""
    cutoff = now - timedelta(days=days)
    counts = {"users": 0, "skipped": 0, "revived": 0}
    cursor = db.users.find({}, {"email": 1, "loginLastDate": 1}).batch_size(batch)
    try:
        while users := list(islice(cursor, batch)):
            counts["users"] += len(users)
            inactive: list[str] = []
            active: list[str] = []
            for user in users:
                email = user.get("email")
                if isinstance(email, str):
                    seen = last_login(user.get("loginLastDate"), now)
                    (active if seen is not None and seen >= cutoff else inactive).append(email)
            if inactive:
                counts["skipped"] += db.networks.update_many(
                    {"user": {"$in": inactive}, "skip": {"$ne": True}},
                    {"$set": {"skip": True, "skipReason": REASON}},
                ).modified_count
            if active:
                counts["revived"] += db.networks.update_many(
                    {"user": {"$in": active}, "skip": True, "skipReason": REASON},
                    {"$unset": {"skip": "", "skipReason": ""}, "$set": {"scheduledTo": now}},
                ).modified_count
    finally:
        cursor.close()
    return counts


def last_login(value: Any, now: datetime) -> datetime | None:
    """`users.loginLastDate` as a UTC datetime: a date (naive ones are UTC), or an ISO 8601 string some writers
    store; anything else counts as never."""
    if isinstance(value, str):
        try:
            value = parse_iso(value.strip())
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=now.tzinfo)


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
