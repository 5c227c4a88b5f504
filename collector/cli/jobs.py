"""`collector jobs list` (each collector's recurring jobs, from its heartbeat: ops/jobs.py) and `collector jobs run
inactive-sweep` (the daemon's own sweep, run now: daemon/sweep.py)."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from ..exitcodes import EXIT_NO, EXIT_OK
from ..settings import Settings
from .common import Commands, on_database


def register(commands: Commands) -> None:
    jobs = commands.add_parser(
        "jobs",
        description="List the collectors' recurring jobs, or run one now.",
        help="the collectors' recurring jobs: list them, or run the inactive sweep now",
    )
    job_verbs = jobs.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = job_verbs.add_parser(
        "list",
        description="List each collector's jobs: trigger, next run, last success and failure.",
        help="per collector (from its heartbeat): trigger, next run, last success and failure",
    )
    job_run = job_verbs.add_parser(
        "run",
        description="Run a job now: the inactive sweep.",
        help="run a job now: inactive-sweep",
    )
    job_run.add_argument("job", choices=("inactive-sweep",))
    job_run.add_argument("--dry-run", action="store_true", help="say what it would skip and revive; write nothing")
    job_run.add_argument("--force", action="store_true", help="run again even if it ran today")
    listing.set_defaults(handler=list_jobs)
    job_run.set_defaults(handler=run_job)


@on_database
def list_jobs(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    from ..ops import jobs

    print("\n".join(jobs.list_jobs(db)))
    return EXIT_OK


@on_database
def run_job(args: argparse.Namespace, settings: Settings, db: Any) -> int:
    """The inactive sweep now; exit 1 when it already ran today (and --force was not given)."""
    from ..daemon.sweep import run_now
    from ..sdk.timeutil import utcnow

    lines = run_now(db, settings, utcnow(), f"{socket.gethostname()}-manual", args.dry_run, args.force)
    print("\n".join(lines))
    return EXIT_NO if lines[0].startswith("inactive sweep: already run today") else EXIT_OK
