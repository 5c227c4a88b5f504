"""The commands of a MongoDB 7.0 without sessions, run on a mongomock client: what `mongowire.py`'s server answers
(find/getMore/killCursors, aggregate, count, insert, update, delete, distinct, createIndexes, listIndexes,
dropIndexes, drop, dropDatabase, ping, hello). One lock around every command: mongomock is not thread-safe."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import bson
import mongomock

from .idlookup import key
from .mongoquick import sorted_first

MAX_MESSAGE = 48_000_000  # bytes of one wire message, at most
HELLO = {
    "ismaster": True,
    "isWritablePrimary": True,
    "helloOk": True,
    "maxBsonObjectSize": 16 * 1024 * 1024,
    "maxMessageSizeBytes": MAX_MESSAGE,
    "maxWriteBatchSize": 100_000,
    "minWireVersion": 0,
    "maxWireVersion": 21,
    "readOnly": False,
}
INDEX_OPTIONS = ("unique", "sparse", "partialFilterExpression", "expireAfterSeconds")
COUNT_SHAPES = [("$match", *middle, "$group") for middle in ((), ("$skip",), ("$limit",), ("$skip", "$limit"))]
COUNT_GROUP = {"_id": 1, "n": {"$sum": 1}}


class CommandError(Exception):
    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class Commands:
    """Runs commands on `client` (`quick_inserts`: see mongowire.WireProcess); open cursors are kept here."""

    def __init__(self, client: Any, quick_inserts: bool = False):
        self.client = client
        self.quick_inserts = quick_inserts
        self.lock = threading.Lock()
        self.cursors: dict[int, tuple[list[dict], str]] = {}
        self.cursor_ids = itertools.count(1)
        self.count = 0  # commands run

    def run(self, command: dict, sequences: list[tuple[str, list[dict]]], connection_id: int = 0) -> dict:
        for name, docs in sequences:  # OP_MSG kind 1 sections ("documents", "updates", "deletes")
            command[name] = docs
        name = next(iter(command), "")
        try:
            with self.lock:
                self.count += 1
                answer = self.dispatch(name, command, connection_id)
        except CommandError as exc:
            return {"ok": 0.0, "errmsg": str(exc), "code": exc.code}
        except mongomock.OperationFailure as exc:
            return {"ok": 0.0, "errmsg": str(exc), "code": exc.code or 2}
        except Exception as exc:  # mongomock refusing something: the command fails, the server goes on
            return {"ok": 0.0, "errmsg": f"{type(exc).__name__}: {exc}", "code": 2}
        return {**answer, "ok": 1.0}

    def dispatch(self, name: str, command: dict, connection_id: int) -> dict:
        handler: Callable[[dict], dict] | None = getattr(self, "cmd_" + name.lower(), None)
        if name.lower() in ("hello", "ismaster"):
            return {**HELLO, "localTime": datetime.now(UTC), "connectionId": connection_id}
        if handler is None:
            raise CommandError(f"no such command: '{name}'", 59)
        return handler(command)

    def collection(self, command: dict, name: str) -> Any:
        return self.client[command.get("$db", "test")][command[name]]

    def cursor(self, docs: list[dict], ns: str, batch: int | None, single: bool = False) -> dict:
        size = batch if batch and batch > 0 else 101
        first, rest = docs[:size], docs[size:]
        cursor_id = 0
        if rest and not single:
            cursor_id = next(self.cursor_ids)
            self.cursors[cursor_id] = (rest, ns)
        return {"cursor": {"id": bson.Int64(cursor_id), "ns": ns, "firstBatch": first}}

    def cmd_ping(self, command: dict) -> dict:
        return {}

    cmd_buildinfo = cmd_endsessions = cmd_ping

    def cmd_find(self, command: dict) -> dict:
        coll = self.collection(command, "find")
        ns = f"{command.get('$db')}.{command['find']}"
        quick = sorted_first(coll, command)
        if quick is not None:
            return self.cursor(quick, ns, command.get("batchSize"), bool(command.get("singleBatch")))
        cursor = coll.find(command.get("filter") or {}, command.get("projection"))
        if command.get("sort"):
            cursor = cursor.sort(list(command["sort"].items()))
        if command.get("skip"):
            cursor = cursor.skip(command["skip"])
        if command.get("limit"):
            cursor = cursor.limit(abs(command["limit"]))
        return self.cursor(list(cursor), ns, command.get("batchSize"), bool(command.get("singleBatch")))

    def cmd_getmore(self, command: dict) -> dict:
        docs, ns = self.cursors.pop(int(command["getMore"]), ([], ""))
        size = command.get("batchSize") or 101
        batch, rest = docs[:size], docs[size:]
        cursor_id = 0
        if rest:
            cursor_id = int(command["getMore"])
            self.cursors[cursor_id] = (rest, ns)
        return {"cursor": {"id": bson.Int64(cursor_id), "ns": ns, "nextBatch": batch}}

    def cmd_killcursors(self, command: dict) -> dict:
        for cursor_id in command.get("cursors", []):
            self.cursors.pop(int(cursor_id), None)
        return {"cursorsKilled": command.get("cursors", [])}

    def cmd_aggregate(self, command: dict) -> dict:
        coll = self.collection(command, "aggregate")
        counted = self.counted(coll, command.get("pipeline", []))
        docs = counted if counted is not None else list(coll.aggregate(command.get("pipeline", [])))
        ns = f"{command.get('$db')}.{command['aggregate']}"
        return self.cursor(docs, ns, (command.get("cursor") or {}).get("batchSize"))

    @staticmethod
    def counted(coll: Any, pipeline: list) -> list[dict] | None:
        """pymongo's `count_documents` ($match, $skip?, $limit?, then a $group counting) answered by mongomock's
        count, which filters without copying every matching document as its aggregate does (a count of 40,000
        stored items took seconds); None for any other pipeline."""
        if not all(isinstance(stage, dict) and len(stage) == 1 for stage in pipeline):
            return None
        stages = {name: value for stage in pipeline for name, value in stage.items()}
        if tuple(next(iter(stage)) for stage in pipeline) not in COUNT_SHAPES or stages["$group"] != COUNT_GROUP:
            return None
        options = {name[1:]: stages[name] for name in ("$skip", "$limit") if name in stages}
        n = coll.count_documents(stages["$match"], **options)
        return [{"_id": 1, "n": n}] if n else []

    def cmd_distinct(self, command: dict) -> dict:
        coll = self.collection(command, "distinct")
        return {"values": coll.distinct(command["key"], command.get("query") or {})}

    def cmd_count(self, command: dict) -> dict:
        return {"n": self.collection(command, "count").count_documents(command.get("query") or {})}

    def cmd_insert(self, command: dict) -> dict:
        coll = self.collection(command, "insert")
        docs = command.get("documents", [])
        quick = self.quick_inserts and not self.unique_indexes(coll)
        quick = quick and all(key(doc.get("_id")) is not None for doc in docs)  # ids mongomock keys (see idlookup)
        errors, n = [], 0
        for index, doc in enumerate(docs):
            try:
                if quick:  # unique by _id only: stored as decoded, without mongomock's per-document copies
                    if key(doc["_id"]) in coll._store:
                        raise mongomock.DuplicateKeyError(f"E11000 duplicate key error: _id {doc['_id']!r}", 11000)
                    coll._store[key(doc["_id"])] = doc
                else:
                    coll.insert_one(doc)
                n += 1
            except mongomock.DuplicateKeyError as exc:
                errors.append({"index": index, "code": 11000, "errmsg": str(exc)})
                if command.get("ordered", True):
                    break
        return {"n": n, **({"writeErrors": errors} if errors else {})}

    @staticmethod
    def unique_indexes(coll: Any) -> list[str]:
        return [name for name, info in coll.index_information().items() if info.get("unique") and name != "_id_"]

    def cmd_update(self, command: dict) -> dict:
        coll = self.collection(command, "update")
        errors: list[dict] = []
        upserted: list[dict] = []
        n = modified = 0
        for index, spec in enumerate(command.get("updates", [])):
            try:
                result = self._update(coll, spec)
            except mongomock.DuplicateKeyError as exc:
                errors.append({"index": index, "code": 11000, "errmsg": str(exc)})
            except mongomock.OperationFailure as exc:
                errors.append({"index": index, "code": exc.code or 2, "errmsg": str(exc)})
            else:
                n += result.matched_count
                modified += result.modified_count
                if result.upserted_id is not None:
                    n += 1
                    upserted.append({"index": index, "_id": result.upserted_id})
            if errors and command.get("ordered", True):
                break
        answer: dict[str, Any] = {"n": n, "nModified": modified}
        if upserted:
            answer["upserted"] = upserted
        if errors:
            answer["writeErrors"] = errors
        return answer

    @staticmethod
    def _update(coll: Any, spec: dict) -> Any:
        query, update, upsert = spec.get("q") or {}, spec.get("u") or {}, bool(spec.get("upsert"))
        options = {"array_filters": spec["arrayFilters"]} if spec.get("arrayFilters") else {}
        if isinstance(update, dict) and update and not next(iter(update)).startswith("$"):
            return coll.replace_one(query, update, upsert=upsert)
        if spec.get("multi"):
            return coll.update_many(query, update, upsert=upsert, **options)
        return coll.update_one(query, update, upsert=upsert, **options)

    def cmd_delete(self, command: dict) -> dict:
        coll = self.collection(command, "delete")
        n = 0
        for spec in command.get("deletes", []):
            query = spec.get("q") or {}
            n += (coll.delete_one(query) if spec.get("limit") == 1 else coll.delete_many(query)).deleted_count
        return {"n": n}

    def cmd_createindexes(self, command: dict) -> dict:
        coll = self.collection(command, "createIndexes")
        for index in command.get("indexes", []):
            options = {k: v for k, v in index.items() if k not in ("key", "v")}
            coll.create_index(list(index["key"].items()), **options)
        return {"numIndexesAfter": len(coll.index_information())}

    def cmd_listindexes(self, command: dict) -> dict:
        coll = self.collection(command, "listIndexes")
        indexes = [
            {**{k: v for k, v in info.items() if k in INDEX_OPTIONS}, "v": 2, "key": dict(info["key"]), "name": name}
            for name, info in coll.index_information().items()
        ]
        return self.cursor(indexes, f"{command.get('$db')}.{command['listIndexes']}", None)

    def cmd_dropindexes(self, command: dict) -> dict:
        coll = self.collection(command, "dropIndexes")
        index = command.get("index")
        if index == "*":
            coll.drop_indexes()
        else:
            coll.drop_index(index)
        return {}

    def cmd_drop(self, command: dict) -> dict:
        self.client[command.get("$db", "test")].drop_collection(command["drop"])
        return {}

    def cmd_dropdatabase(self, command: dict) -> dict:
        self.client.drop_database(command.get("$db", "test"))
        return {}
