"""`collector status --check`: the monitoring-plugin verdict on a status report (status.py `gather`) — the exit
code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) and one line naming every problem, with performance data."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .status import serves

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3  # the monitoring-plugin exit codes
STATE_WORDS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
Problem = tuple[int, str]  # (level, message)


def lag_bounds(settings: Any, mode: str, warn: float | None = None, crit: float | None = None) -> tuple[float, float]:
    """The schedule-lag bounds of `mode` (seconds): WARNING past one interval of the mode — NORMAL_INTERVAL for
    normal networks, RATE_LIMIT_INTERVAL for the initial collector (the longest wait it schedules when no reset
    is given) — CRITICAL past two. Either can be given instead."""
    interval = settings.normal_interval if mode == "normal" else settings.rate_limit_interval
    interval = max(interval, 60.0)  # an interval of seconds (tests, demos) would make every hiccup an alarm
    crit = crit if crit is not None else 2 * (warn if warn is not None else interval)
    warn = warn if warn is not None else min(interval, crit)
    return warn, crit


def check(
    status: dict[str, Any], settings: Any, warn: float | None = None, crit: float | None = None
) -> tuple[int, str]:
    """`collector status --check`: the exit code and one line naming every problem, with performance data."""
    pauses = status.get("pauses", [])
    problems = expired_pauses(pauses)
    perf = []
    for mode, info in status["modes"].items():
        live = [i for i in status["instances"] if i["live"] and i["mode"] == mode]
        w, c = lag_bounds(settings, mode, warn, crit)
        problems += mode_problems(mode, info, live, pauses, w, c) + far_leases(mode, info)
        perf += [f"lag_{mode}={info['lagSeconds']:.0f}s;{w:.0f};{c:.0f};0", f"due_{mode}={info['due']};;;0"]
        perf.append(f"live_{mode}={len(live)}")
    problems += renewal_problem(status.get("renewals"))
    if "sinks" in status:
        sink_issues, sink_perf = sink_problems(status["sinks"], settings)
        problems += sink_issues
        perf += sink_perf
    code = max((level for level, _ in problems), default=OK)
    if problems:
        text = "; ".join(message for _, message in sorted(problems, key=lambda p: -p[0]))
    else:
        text = "every mode with due networks has a live collector, schedule lag within bounds"
    return code, f"{STATE_WORDS[code]}: {text} | {' '.join(perf)}"


def renewal_problem(renewals: dict[str, Any] | None) -> list[Problem]:
    """WARNING naming the networks that wait for re-authorisation (their service refused the token; nothing is
    collected for them until `collector connect SERVICE --user EMAIL` renews them)."""
    if not renewals or not renewals["count"]:
        return []
    named = ", ".join(f"{plain(n['user'])} {plain(n['service'])} ({plain(n['id'])})" for n in renewals["first"])
    more = renewals["count"] - len(renewals["first"])
    rest = f" and {more} more" if more > 0 else ""
    return [
        (
            WARNING,
            f"{renewals['count']} networks wait for re-authorisation (collector connect SERVICE --user EMAIL): "
            f"{named}{rest}",
        )
    ]


def expired_pauses(pauses: list[dict[str, Any]]) -> list[Problem]:
    return [
        (WARNING, f"pause of mode {p['mode']}, service {p['service']} expired at {p['until']:%Y-%m-%d %H:%M} UTC")
        for p in pauses
        if p["expired"]
    ]


def mode_problems(
    mode: str, info: dict[str, Any], live: list[dict[str, Any]], pauses: list[dict[str, Any]], warn: float, crit: float
) -> list[Problem]:
    """A paused mode is a warning, whatever waits meanwhile (an operator's decision; its lag grows by design).
    Otherwise: due networks and no live collector, or none serving a service with due networks, is critical;
    then the schedule lag against its bounds."""
    paused = [p for p in pauses if not p["expired"] and p["mode"] in ("*", mode) and p["service"] == "*"]
    if paused:
        p = paused[0]
        since = f" since {p['at']:%Y-%m-%d %H:%M} UTC" if isinstance(p["at"], datetime) else ""
        return [(WARNING, f"mode {mode} paused{since} by {p['by']}" + (f": {p['reason']}" if p["reason"] else ""))]
    if info["due"] and not live:
        problems = [(CRITICAL, f"mode {mode}: {info['due']} networks due and no live collector")]
    else:  # collectors may serve chosen services (SERVICES): every service with due networks needs one
        problems = [
            (CRITICAL, f"mode {mode}: {n} {service} networks due and no live collector serves {service}")
            for service, n in sorted(info.get("dueByService", {}).items())
            if not any(serves(i, service) for i in live)
        ]
    return problems + lag_problem(mode, info["lagSeconds"], warn, crit)


def far_leases(mode: str, info: dict[str, Any]) -> list[Problem]:
    """Leases whose end lies further ahead than LEASE_SECONDS (plus a minute) reaches: written by no holder that
    renews (a clock far ahead, a shell, a collector gone); the next claim takes them over and says so."""
    n = info.get("farLeases", 0)
    if not n:
        return []
    return [
        (
            WARNING,
            f"mode {mode}: {n} network leases end further ahead than LEASE_SECONDS allows (a holder that no longer "
            "renews, or a clock far ahead); the next claim takes them over",
        )
    ]


def lag_problem(mode: str, lag: float, warn: float, crit: float) -> list[Problem]:
    if lag > crit:
        return [(CRITICAL, f"mode {mode}: schedule lag {lag:.0f}s over {crit:.0f}s")]
    if lag > warn:
        return [(WARNING, f"mode {mode}: schedule lag {lag:.0f}s over {warn:.0f}s")]
    return []


SINK_LAG_WARN = 900.0  # seconds, when the settings do not say (SINK_LAG_WARN)
SINK_FAILING_WARN = 300.0  # seconds a sink may fail every delivery before `--check` warns
REASON_SHOWN = 160  # characters of a failing sink's reason in the one line


def sink_problems(report: dict[str, Any], settings: Any) -> tuple[list[Problem], list[str]]:
    """WARNING for a configured sink stopped (its credentials refused), paused, failing every delivery for
    SINK_FAILING_WARN or more (with the reason), or lagging past SINK_LAG_WARN, for registered sinks the lease
    holder does not configure (it queues no new item), for a service lease that ends further ahead than a lease
    reaches (stale), and for sinks configured while no sink service holds the lease; the backlog and lag of each,
    as performance data.
    Sinks the database knows and the settings no longer name are not judged."""
    configured = set(getattr(settings, "sinks", ()) or ())
    warn = float(getattr(settings, "sink_lag_warn", SINK_LAG_WARN))
    problems: list[Problem] = []
    perf: list[str] = []
    for row in report["sinks"]:
        if row["name"] not in configured:
            continue
        perf += [
            f"sink_{row['name']}_backlog={row['backlog']};;;0",
            f"sink_{row['name']}_lag={row['lagSeconds']:.0f}s;{warn:.0f};;0",
        ]
        problems += sink_state(row, warn)
    service = report["service"]
    if service is not None and service["live"] and service.get("blocked"):
        names = plain(", ".join(service["blocked"]))
        problems.append(
            (
                WARNING,
                f"sink service {plain(service['owner'])} does not configure sink(s) {names}, registered in MongoDB: "
                "new items are queued for no sink (kept marked) until it does, or `collector sinks forget NAME`",
            )
        )
    if service is not None and service.get("stale"):
        ends = f"{service['leaseUntil']:%Y-%m-%d %H:%M} UTC" if service["leaseUntil"] else "no date"
        problems.append(
            (
                WARNING,
                f"the sink service lease of {plain(service['owner'])} is stale: it ends {ends}, further ahead than a "
                "lease reaches (no holder renews it); the next `collector sink` takes it over",
            )
        )
    elif configured and (service is None or not service["live"]):
        since = (
            f" (lease expired {service['leaseUntil']:%Y-%m-%d %H:%M} UTC)" if service and service["leaseUntil"] else ""
        )
        problems.append(
            (WARNING, f"sinks configured and no sink service holds the lease{since}: is `collector sink` running?")
        )
    return problems, perf


def sink_state(row: dict[str, Any], warn: float) -> list[Problem]:
    """A configured sink's problem, if it has one (a `|` in a reason would start the performance data: `/`)."""
    name = row["name"]
    if row["stopped"]:
        stopped = row["stopped"]
        since = f" since {stopped['at']:%Y-%m-%d %H:%M} UTC" if isinstance(stopped["at"], datetime) else ""
        return [(WARNING, f"sink {name} stopped{since}: {plain(stopped['reason']) or 'credentials refused'}")]
    if row["paused"]:
        paused = row["paused"]
        since = f" since {paused['at']:%Y-%m-%d %H:%M} UTC" if isinstance(paused["at"], datetime) else ""
        return [
            (
                WARNING,
                f"sink {name} paused{since} by {plain(paused['by']) or '?'}"
                + (f": {plain(paused['reason'])}" if paused["reason"] else ""),
            )
        ]
    failing = row.get("failing")
    if failing and failing["seconds"] >= SINK_FAILING_WARN:
        why = plain(failing["reason"][:REASON_SHOWN]) or "?"
        return [
            (
                WARNING,
                f"sink {name} failing since {failing['since']:%Y-%m-%d %H:%M} UTC ({failing['seconds']:.0f}s, "
                f"nothing delivered): {why}",
            )
        ]
    if row["lagSeconds"] > warn:
        return [(WARNING, f"sink {name}: lag {row['lagSeconds']:.0f}s over {warn:.0f}s ({row['backlog']} queued)")]
    return []


def plain(reason: str) -> str:
    return reason.replace("|", "/")
