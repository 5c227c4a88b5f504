"""`collector sinks list` and `collector sinks status` as text, and the sinks line of `collector status`: the
reports of ops/sinks.py, whose text is already cut, masked and escaped."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .sinks import FAILURE_KINDS
from .statusfields import _s as duration


def at(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value is not None else "?"


def state_word(row: Mapping[str, Any]) -> str:
    if row["stopped"]:
        return "STOPPED"
    if row["paused"]:
        return "paused"
    if row.get("failing"):
        return "FAILING"
    if row["configured"] is False:
        return "unconfigured"
    return "ok" if row["registered"] else "new"


def service_line(report: Mapping[str, Any]) -> str:
    service = report["service"]
    if service is None:
        return "sink service: none has run (no lease)"
    beat = f", beat {duration(service['beatAge'])} ago" if service["beatAge"] is not None else ""
    since = f" since {at(service['since'])}" if service["since"] is not None else ""
    held = (
        f"holds the lease{since}" if service["live"] else f"lease EXPIRED at {at(service['leaseUntil'])} (not running?)"
    )
    if service.get("stale"):
        ends = at(service["leaseUntil"]) if service["leaseUntil"] else "no date"
        held = f"lease STALE: it ends {ends}, further ahead than a lease reaches (the next sink service takes it over)"
    return f"sink service: {service['owner']} (host {service['host']}, pid {service['pid']}) {held}{beat}"


def blocked_lines(report: Mapping[str, Any]) -> list[str]:
    """The registered sinks the lease holder does not configure: it queues no new item meanwhile."""
    service = report["service"]
    if service is None or not service["live"] or not service.get("blocked"):
        return []
    names = ", ".join(service["blocked"])
    return [
        f"  NEW ITEMS WAIT: this service does not configure sink(s) {names}, registered in MongoDB: new items stay "
        "marked (nothing lost) and are queued for no sink until its SINKS names them, or `collector sinks forget "
        "NAME` for a sink removed on purpose"
    ]


def render_status(report: Mapping[str, Any]) -> str:
    lines = [f"sinks at {at(report['at'])}", service_line(report), *blocked_lines(report)]
    if report["outboxPending"] is not None:
        lines.append(f"items stored, not yet queued for the sinks: {report['outboxPending']}")
    lines += [
        "",
        f"{'sink':<16} {'kind':<11} {'state':<12} {'backlog':>8} {'lag':>6} {'delivered':>10} {'dead':>6} "
        f"{'refused':>8} {'tooLarge':>8} {'rejected':>8} {'auth':>5}",
    ]
    for row in report["sinks"]:
        counts, failed = row["counts"], row["counts"]["failed"]
        lines.append(
            f"{row['name'][:16]:<16} {row['kind'][:11]:<11} {state_word(row):<12} {row['backlog']:>8} "
            f"{duration(row['lagSeconds']):>6} {counts['delivered']:>10} {counts['deadLettered']:>6} "
            + " ".join(f"{failed[k]:>{w}}" for k, w in zip(FAILURE_KINDS, (8, 8, 8, 5), strict=True))
        )
        lines += [f"  {line}" for line in row_notes(row)]
    if not report["sinks"]:
        lines.append("(no sink configured or known)")
    return "\n".join(lines)


def row_notes(row: Mapping[str, Any]) -> list[str]:
    notes = failing_notes(row)
    if row["stopped"]:
        stopped = row["stopped"]
        notes.append(
            f"stopped since {at(stopped['at'])}: {stopped['reason'] or '?'}; fix its credentials, then "
            "`collector sinks resume NAME`"
        )
    if row["paused"]:
        paused = row["paused"]
        notes.append(
            f"paused since {at(paused['at'])} by {paused['by'] or '?'}"
            + (f": {paused['reason']}" if paused["reason"] else "")
        )
    fill = row["backfill"]
    if fill is not None:
        what = f"replay of items from {at(fill['since'])}" if fill["since"] else "backfill"
        if fill["running"]:
            notes.append(
                f"{what}: running since {at(fill['startedAt'])} by {fill['by'] or '?'}, "
                f"{fill['enqueued']} queued so far"
            )
        else:
            notes.append(f"{what}: done at {at(fill['doneAt'])}, {fill['enqueued']} queued")
    if row["deadLetters"]:
        notes.append(f"{row['deadLetters']} dead letters kept (documents the destination refused)")
    for letter in row.get("recentDeadLetters", []):
        status = f" ({letter['status']})" if letter["status"] else ""
        notes.append(f"  item {letter['item']} at {at(letter['at'])}{status}: {letter['reason'] or '?'}")
    if row["configured"] is False:
        notes.append(
            "no longer configured (SINKS does not name it): its queue waits, nothing is delivered; removed on "
            "purpose: `collector sinks forget NAME`"
        )
    elif not row["registered"]:
        notes.append("configured; no sink service has registered it yet")
    return notes


def failing_notes(row: Mapping[str, Any]) -> list[str]:
    """A failing sink: since when nothing was delivered, the last failure and its reason."""
    failing = row.get("failing")
    if not failing:
        return []
    last = f", last at {at(failing['at'])}" if failing["at"] is not None else ""
    return [
        f"failing since {at(failing['since'])} ({duration(failing['seconds'])}, nothing delivered since){last}: "
        f"{failing['reason'] or '?'}"
    ]


def summary(report: Mapping[str, Any]) -> str:
    """One line for `collector status`."""
    parts = []
    for row in report["sinks"]:
        word = state_word(row)
        flag = "" if word == "ok" else f" {word}"
        parts.append(f"{row['name']}{flag} {row['backlog']} queued, lag {duration(row['lagSeconds'])}")
    if not parts:
        return "sinks: none"
    service = report["service"]
    lease_text = (
        "no sink service holds the lease" if service is None or not service["live"] else f"service {service['owner']}"
    )
    outbox = f", {report['outboxPending']} not yet queued" if report["outboxPending"] else ""
    return f"sinks: {'; '.join(parts)} ({lease_text}{outbox})"


def render_list(listing_: Mapping[str, Any]) -> str:
    lines = [
        f"{'sink':<16} {'kind':<11} {'batch':>6} {'conc':>5} {'timeout':>8} {'pace':>6}  {'host':<32} "
        "services / options"
    ]
    for row in listing_["configured"]:
        services = ",".join(row["services"]) if row["services"] else "every service"
        options = " ".join(f"{k}={v}" for k, v in row["options"].items())
        backfill = "" if row["backfill"] else " (no backfill)"
        lines.append(
            f"{row['name'][:16]:<16} {row['kind'][:11]:<11} {row['batch']:>6} {row['concurrency']:>5} "
            f"{row['timeout']:>7g}s {row['pace']:>6g}  {row['host'][:32]:<32} {services}{backfill}"
            + (f"; {options}" if options else "")
        )
    if not listing_["configured"]:
        lines.append("(no sink configured: SINKS is empty)")
    for row in listing_["unconfigured"]:
        lines.append(f"{row['name'][:16]:<16} {row['kind'][:11]:<11} known in MongoDB, no longer configured")
    return "\n".join(lines)
