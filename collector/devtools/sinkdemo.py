"""`collector demo`'s sinks: once the collection is done, a sink service (sinks/service.py, the one `collector sink`
runs) delivers the demo's items to local destinations (destinations.py): a webhook receiver in this process that
checks every request's signature, and, with `--sink opensearch`, osmem-server, which is then searched.

The service runs on this thread, one `step()` after another (the demo's database is mongomock in this process, and
mongomock is not thread-safe), until every item is delivered and the queues are empty. The sinks are made with
SINK_<NAME>_BACKFILL=false: the collector marked every item it stored (`sinkPending`), so the service's mover alone
hands them all over, as it does for the items a running collector stores.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from typing import Any

from ..settings import load_settings
from ..textout import printable
from . import idlookup
from .destinations import Receiver, Search, new_secret, words

KINDS = ("webhook", "opensearch")
INDEX = "items"
DRAIN_LIMIT_S = 120.0  # the demo's items (~600) take about a second


class SinkUsage(ValueError):
    """A --sink value the demo cannot run (unknown, or osmem-server not installed)."""


def parse_kinds(text: str) -> tuple[str, ...]:
    """`--sink`: kinds, comma-separated (webhook, opensearch), `all` for both, `none` for no sink."""
    text = text.strip().lower()
    if text == "none":
        return ()
    kinds = KINDS if text == "all" else tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise SinkUsage(f"--sink takes {', '.join(KINDS)}, all or none (comma-separated), not {text!r}")
    if "opensearch" in kinds and not Search.installed():
        raise SinkUsage("--sink opensearch needs osmem-server (pip install 'likeastore-collector[test]')")
    return kinds


def sink_settings(env: dict[str, str]) -> Any:
    """The service's settings: the defaults and the environment, without any sink of the operator's own."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SINK")}
    return load_settings({**base, **env}, read_dotenv=False)


def drained(db: Any, names: list[str]) -> bool:
    """Every configured sink known, no item still marked and no queue entry left (an entry goes only once its
    destination took it, or when dead-lettered)."""
    return (
        db.sinks.count_documents({"_id": {"$in": names}}) == len(names)
        and db.items.count_documents({"sinkPending": True}) == 0
        and db.sinkQueue.count_documents({}) == 0
    )


def run_service(db: Any, settings: Any, names: list[str], limit_s: float = DRAIN_LIMIT_S) -> dict[str, Any]:
    """Steps of a sink service on this thread until drained (or a sink stopped, or `limit_s` passed); its figures."""
    from ..sinks.service import SinkService

    service = SinkService(db, settings, owner="demo")
    deadline = time.monotonic() + limit_s
    try:
        while True:
            wait = service.step()
            stopped = db.sinks.count_documents({"_id": {"$in": names}, "stopped": {"$exists": True}})
            if drained(db, names) or stopped or time.monotonic() > deadline:
                break
            time.sleep(min(max(wait, 0.0), 0.05))
    finally:
        service.stop(10)
    return {name: figures for name, figures in service.snapshot().items() if name in names}


def deliver(db: Any, kinds: tuple[str, ...], out: Any) -> dict[str, Any]:
    """Deliver every item in `db` to a sink of each kind; print a line per sink; what each destination holds."""
    items = db.items.count_documents({})
    with ExitStack() as stack:
        env = {"SINKS": ",".join(kinds), "ALLOW_PRIVATE_HOSTS": "true"}  # local destinations, plain http
        receiver = search = None
        if "webhook" in kinds:
            secret = new_secret()
            receiver = Receiver(secret)
            env |= {"SINK_WEBHOOK_URL": stack.enter_context(receiver), "SINK_WEBHOOK_SECRET": secret}
        if "opensearch" in kinds:
            search = Search.start()
            if search is None:
                raise SinkUsage("--sink opensearch needs osmem-server")
            stack.enter_context(search)
            env |= {"SINK_OPENSEARCH_URL": search.url, "SINK_OPENSEARCH_INDEX": INDEX}
        env |= {f"SINK_{kind.upper()}_BACKFILL": "false" for kind in kinds}
        started = time.perf_counter()
        with idlookup.installed():  # `_id` queries looked up, as MongoDB answers them from its index
            figures = run_service(db, sink_settings(env), list(kinds))
        elapsed = round(time.perf_counter() - started, 2)
        result: dict[str, Any] = {}
        if receiver is not None:
            result["webhook"] = webhook_result(db, receiver, figures.get("webhook"), items)
        if search is not None:
            result["opensearch"] = search_result(db, search, figures.get("opensearch"), items)
    for name, held in result.items():
        print(f"sink: {held['delivered']} of {items} items delivered to {name} {held['note']} in {elapsed} s", file=out)
    ok = all(held["ok"] for held in result.values())
    shown = {name: {k: v for k, v in held.items() if k not in ("note", "ok")} for name, held in result.items()}
    return {"items": items, "elapsed_s": elapsed, **shown, "ok": ok}


def delivered(figures: Any) -> int:
    return int(getattr(figures, "delivered", 0) or 0)


def webhook_result(db: Any, receiver: Receiver, figures: Any, items: int) -> dict[str, Any]:
    stats = receiver.stats()
    expected = {str(doc["_id"]) for doc in db.items.find({}, {"_id": 1})}
    missing = len(expected - receiver.ids)
    bad = stats["bad_signatures"]
    note = "(signatures verified)" if not bad else f"({bad} requests refused for a bad signature)"
    ok = missing == 0 and bad == 0 and delivered(figures) >= items
    return {"delivered": delivered(figures), **stats, "missing": missing, "note": note, "ok": ok}


def search_result(db: Any, search: Search, figures: Any, items: int) -> dict[str, Any]:
    count = search.count(INDEX)
    word = words(doc.get("title") or "" for doc in db.items.find({}, {"title": 1}).limit(200))
    hits = search.search(INDEX, word) if word else []
    hit = printable(str(hits[0]["_source"].get("title", ""))[:80]) if hits else ""
    note = f"(osmem-server {search.version}: _count {count}; a search for {word!r} finds {hit!r})"
    ok = count == items and bool(hit) and delivered(figures) >= items
    return {"delivered": delivered(figures), "count": count, "search": word, "hit": hit, "note": note, "ok": ok}
