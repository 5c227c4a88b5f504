"""The claim at scale, for `collector bench` (issue 45): its wall time with `--claim-networks` networks (3,000,
30,000 and 100,000 by default) in a database out of this process — the mongowire stand-in in a process of its
own, whose CPU is reported apart (it is mongomock: it scans, it is not a database), or the MongoDB of
`--mongodb-uri` — and, on a real MongoDB, `explain("executionStats")` of the claim and of every due read at the
largest size: keys and documents examined per document returned.

The fleet is the steady state of a fleet that keeps up: fewer networks due than a claim takes (DUE), the rest
scheduled ahead, some leased (their `scheduledTo` at the lease's end, as claims leave them), some parked
(disabled, `scheduledTo` PARK_SECONDS ahead), and a few flagged within the due range as another program may leave
them (a flag set without a move), the same number at every size.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..engine.store import LEASE_DEFAULT, Store, claim_query, due_query, park, unscheduled, unscheduled_due
from .options import Options

DUE = 96  # networks due at every size: fewer than a claim takes (the steady state of a fleet that keeps up)
FLAGGED = 8  # networks another program flagged in the due range at every size: the claim parks them
LIMIT = 192  # a claim's size at --concurrency 64: the free slots plus two concurrencies
RUNS = 3  # claims timed per size (each on the same fleet, the claimed networks put back untimed)
OWNER = "bench-claim"


def sizes_of(opts: Options) -> list[int]:
    return [int(n) for n in str(opts.claim_networks).split(",") if n.strip()]


def fleet(n: int, now: datetime) -> Iterator[dict[str, Any]]:
    """`n` normal-mode networks: DUE of them due, FLAGGED flagged in the due range (by another program), 2%
    leased, 5% parked, the rest scheduled over the next 15 minutes."""
    lease = now + timedelta(seconds=LEASE_DEFAULT)
    for k in range(n):
        doc: dict[str, Any] = {"user": f"u{k}@bench.test", "service": "github", "mode": "normal", "accessToken": "t"}
        if k < DUE:
            doc["scheduledTo"] = now - timedelta(seconds=DUE - k)
        elif k < DUE + FLAGGED:
            doc.update(scheduledTo=now - timedelta(hours=1), unauthorized=True)
        elif k % 50 == 1:
            doc.update(scheduledTo=lease, leaseUntil=lease, leaseOwner="other", leaseToken=f"x{k}", leaseEpoch=1)
        elif k % 20 == 2:
            doc.update(scheduledTo=park(now), disabled=True)
        else:
            doc["scheduledTo"] = now + timedelta(seconds=1 + k % 900)
        yield doc


def fill(db: Any, n: int, now: datetime, batch: int = 5000) -> None:
    docs: list[dict] = []
    for doc in fleet(n, now):
        docs.append(doc)
        if len(docs) == batch:
            db.networks.insert_many(docs, ordered=False)
            docs = []
    if docs:
        db.networks.insert_many(docs, ordered=False)


def put_back(db: Any, now: datetime) -> None:
    """The networks a timed claim took (and parked) due again, as they were: untimed."""
    leased = {"leaseOwner": OWNER}
    db.networks.update_many(leased, {"$set": {"scheduledTo": now - timedelta(seconds=1)}})
    db.networks.update_many(leased, {"$unset": {"leaseOwner": "", "leaseUntil": "", "leaseToken": ""}})
    db.networks.update_many({"unauthorized": True}, {"$set": {"scheduledTo": now - timedelta(hours=1)}})


def time_claims(db: Any, n: int, now: datetime, cpu: Any) -> dict[str, float]:
    """The median wall time of RUNS claims on `n` networks, and the database process's CPU in them (`cpu()`:
    its CPU seconds so far, or None when it is not ours to read)."""
    store = Store(db)
    store.ensure_indexes()
    fill(db, n, now)
    walls, cpus, own, won = [], [], [], 0
    for _ in range(RUNS):
        put_back(db, now)
        store.repaired_at["normal"] = 0.0  # each claim as the first of its process: the repair included
        gc.collect()  # the fleet this process built is not the claim's garbage
        before, started, mine = cpu(), time.perf_counter(), time.process_time()
        won = len(store.claim("normal", now, LIMIT, OWNER, now + timedelta(seconds=LEASE_DEFAULT)))
        walls.append(time.perf_counter() - started)
        own.append(time.process_time() - mine)
        after = cpu()
        if before is not None and after is not None:
            cpus.append(after - before)
    out = {
        f"claim_ms_{n}": round(statistics.median(walls) * 1000, 2),
        f"claim_cpu_ms_{n}": round(statistics.median(own) * 1000, 2),  # the collector's side: driver, BSON, rules
        f"claim_won_{n}": won,
    }
    if cpus:
        db_ms = statistics.median(cpus) * 1000
        out[f"claim_db_cpu_ms_{n}"] = round(db_ms, 2)
        out[f"claim_ms_{n}_less_db"] = round(max(out[f"claim_ms_{n}"] - db_ms, 0.0), 2)
    return out


def recurring(now: datetime) -> list[tuple[str, dict[str, Any]]]:
    """The recurring reads of networks, as the explain command takes them, built with the code's own filters:
    the claim's read, the due counts (the gauges, `status`), the monitor's most behind, the repair's read."""
    claim = claim_query("normal", now, LEASE_DEFAULT)
    due, undated = due_query("normal", now, LEASE_DEFAULT), unscheduled_due("normal", now, LEASE_DEFAULT)
    sort = {"scheduledTo": 1}
    return [
        ("claim", {"find": "networks", "filter": claim, "sort": sort, "limit": LIMIT}),
        ("count_due", {"count": "networks", "query": due}),
        ("count_due_undated", {"count": "networks", "query": undated}),
        ("behind", {"find": "networks", "filter": due, "sort": sort, "limit": 10}),
        ("repair", {"find": "networks", "filter": unscheduled("normal"), "limit": 1000}),
    ]


def _walk(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def explain_figures(name: str, explained: Mapping[str, Any]) -> dict[str, Any]:
    """One query's figures from the explain command's answer (verbosity executionStats), whatever the server's
    layout (the classic engine's `executionStats` at the top, an aggregation's under its `$cursor` stage, slot
    based plans): documents returned (a count's counted), keys and documents examined, their ratio to those
    returned, and the indexes the winning plan reads."""
    stats: Mapping[str, Any] = next(
        (n["executionStats"] for n in _walk(explained) if isinstance(n.get("executionStats"), Mapping)), {}
    )
    returned = int(stats.get("nReturned") or 0)
    counted = [int(n["nCounted"]) for n in _walk(stats) if isinstance(n.get("nCounted"), int)]
    if counted and not returned:
        returned = max(counted)
    keys, docs = int(stats.get("totalKeysExamined") or 0), int(stats.get("totalDocsExamined") or 0)
    planner: Mapping[str, Any] = next(
        (n["queryPlanner"] for n in _walk(explained) if isinstance(n.get("queryPlanner"), Mapping)), {}
    )
    indexes = sorted({str(n["indexName"]) for n in _walk(planner.get("winningPlan", {})) if "indexName" in n})
    per = max(returned, 1)
    return {
        f"explain_{name}_returned": returned,
        f"explain_{name}_keys": keys,
        f"explain_{name}_docs": docs,
        f"explain_{name}_examined_per_returned": round(max(keys, docs) / per, 2),
        f"explain_{name}_index": ",".join(indexes) or "none (a collection scan)",
    }


def explain_all(db: Any, now: datetime) -> dict[str, Any]:
    """`explain` with executionStats of each recurring read, on a real MongoDB (pymongo's `Database.command`)."""
    out: dict[str, Any] = {}
    for name, command in recurring(now):
        out.update(explain_figures(name, db.command("explain", command, verbosity="executionStats")))
    return out


def measure(opts: Options) -> dict[str, Any]:
    """The claim at each size, on the MongoDB of --mongodb-uri (explained at the largest), else on the mongowire
    stand-in in a process of its own (its CPU apart)."""
    from .workloads import Databases

    sizes = sizes_of(opts)
    if not sizes:
        return {}
    now = datetime.now(UTC).replace(microsecond=0)
    if opts.mongodb_uri:
        dbs = Databases(opts.mongodb_uri)
        try:
            out: dict[str, Any] = {"claim_database": "mongodb"}
            for n in sizes:
                db = dbs.new()
                out.update(time_claims(db, n, now, lambda: None))
            put_back(db, now)  # the fleet as a claim finds it
            out.update(explain_all(db, now))
            return out
        finally:
            dbs.close()
    return {"claim_database": "standin", **standin_claims(sizes, now)}


def standin_claims(sizes: list[int], now: datetime) -> dict[str, Any]:
    from ..daemon.procmetrics import usage
    from .mongowire import WireProcess
    from .workloads import Databases

    out: dict[str, Any] = {}
    for n in sizes:  # a fresh stand-in per size: its collection holds one fleet
        wire = WireProcess()
        with wire as uri:
            dbs = Databases(uri, standin=True)
            try:
                proc = f"/proc/{wire.process.pid}"
                out.update(time_claims(dbs.new(), n, now, lambda proc=proc: usage(proc)[1]))
            finally:
                dbs.close()
    return out
