"""`collector jobs list`: each collector's recurring jobs as its heartbeat says — trigger, next run, last success,
last failure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..sdk.redaction import clip
from ..textout import printable


def when(value: Any) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if isinstance(value, datetime) else "-"


def list_jobs(db: Any) -> list[str]:
    lines = []
    for doc in db.collectors.find().sort("_id", 1).limit(1000):
        jobs = doc.get("jobs") if isinstance(doc.get("jobs"), list) else []
        lines.append(printable(f"{doc.get('_id')} ({doc.get('mode')}): {len(jobs)} jobs"))
        lines.append(f"  {'job':<16} {'trigger':<22} {'next run (UTC)':<19}  {'last success':<19}  last failure")
        for job in jobs[:50]:
            if not isinstance(job, dict):
                continue
            name, trigger = clip(job.get("name"), 16), clip(job.get("trigger"), 22)
            nxt, ok, failed = (when(job.get(k)) for k in ("nextRun", "lastSuccess", "lastFailure"))
            times = f"{nxt:<19}  {ok:<19}  {failed}"
            lines.append(printable(f"  {name:<16} {trigger:<22} {times}"))
    return lines or ["(no collector has a heartbeat)"]
