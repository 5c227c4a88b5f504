"""A MongoDB stand-in on a loopback socket: mongomock behind the wire protocol.

No MongoDB server can be installed on our build machines, yet some promises are about a real process talking to
a real socket (a database outage under a running daemon, several collectors sharing one database). `WireServer`
listens on 127.0.0.1, answers pymongo's handshake (OP_QUERY and OP_MSG) as a standalone MongoDB 7.0 without
sessions, and runs the commands the collector and its tools send — find/getMore/killCursors, aggregate, count,
insert, update, delete, distinct, createIndexes, listIndexes, dropIndexes, drop, ping — against one in-memory
mongomock client, under one lock (mongomock is not thread-safe). `stop()` closes the listener and every
connection (the database is "down"); `start()` listens again on the same port with the same data (it "comes
back").

A test and development tool: it has none of a server's guarantees (no durability, no transactions, mongomock's
query semantics), and binds loopback only.

    python -m collector.devtools.mongowire --port 27017   # serve until Ctrl-C
"""

from __future__ import annotations

import argparse
import itertools
import socket
import struct
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import bson
import mongomock
from bson.codec_options import CodecOptions

from .spawned import NoAnswer, answer, spawn

OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013
HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode
MAX_MESSAGE = 48_000_000
CODEC: CodecOptions = CodecOptions(tz_aware=False)  # mongomock keeps naive UTC datetimes; the client decides awareness
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


class CommandError(Exception):
    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class WireServer:
    """Serve a mongomock client on 127.0.0.1:port (0 picks a free port, kept across stop/start)."""

    def __init__(self, port: int = 0, client: Any = None, quick_inserts: bool = False):
        self.client = client if client is not None else mongomock.MongoClient()
        self.quick_inserts = quick_inserts
        self.lock = threading.Lock()
        self.port = port
        self.listener: socket.socket | None = None
        self.connections: set[socket.socket] = set()
        self.cursors: dict[int, tuple[list[dict], str]] = {}
        self.cursor_ids = itertools.count(1)
        self.connection_ids = itertools.count(1)
        self.commands = 0

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/likeastore"

    @property
    def running(self) -> bool:
        return self.listener is not None

    def start(self) -> WireServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="mongowire", daemon=True).start()
        return self

    def stop(self) -> None:
        """The database goes away: no new connection is accepted and every open one is closed."""
        listener, self.listener = self.listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for conn in list(self.connections):
            _close(conn)
        self.connections.clear()

    def __enter__(self) -> WireServer:
        return self.start() if not self.running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the socket side -------------------------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        while self.listener is listener:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="mongowire-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        connection_id = next(self.connection_ids)
        try:
            while True:
                header = _read(conn, HEADER.size)
                if header is None:
                    return
                length, request_id, _, opcode = HEADER.unpack(header)
                if not HEADER.size <= length <= MAX_MESSAGE:
                    return
                body = _read(conn, length - HEADER.size)
                if body is None:
                    return
                reply = self._answer(opcode, body, connection_id)
                if reply is None:
                    return
                opcode_out, payload = reply
                conn.sendall(HEADER.pack(HEADER.size + len(payload), 0, request_id, opcode_out) + payload)
        except OSError:
            return
        finally:
            self.connections.discard(conn)
            _close(conn)

    def _answer(self, opcode: int, body: bytes, connection_id: int) -> tuple[int, bytes] | None:
        if opcode == OP_QUERY:  # the legacy handshake: flags, collection name, skip, limit, query
            end = body.index(b"\x00", 4)
            (size,) = struct.unpack_from("<i", body, end + 9)
            command = bson.decode(body[end + 9 : end + 9 + size], CODEC)
            reply = bson.encode(self.run(command, [], connection_id))
            return OP_REPLY, struct.pack("<iqii", 0, 0, 0, 1) + reply
        if opcode != OP_MSG:
            return None
        command, sequences = _sections(body)
        return OP_MSG, struct.pack("<I", 0) + b"\x00" + bson.encode(self.run(command, sequences, connection_id))

    # --- commands ---------------------------------------------------------------------------------------------
    def run(self, command: dict, sequences: list[tuple[str, list[dict]]], connection_id: int = 0) -> dict:
        for name, docs in sequences:  # OP_MSG kind 1 sections ("documents", "updates", "deletes")
            command[name] = docs
        name = next(iter(command), "")
        try:
            with self.lock:
                self.commands += 1
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
        cursor = coll.find(command.get("filter") or {}, command.get("projection"))
        if command.get("sort"):
            cursor = cursor.sort(list(command["sort"].items()))
        if command.get("skip"):
            cursor = cursor.skip(command["skip"])
        if command.get("limit"):
            cursor = cursor.limit(abs(command["limit"]))
        ns = f"{command.get('$db')}.{command['find']}"
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
        docs = list(coll.aggregate(command.get("pipeline", [])))
        ns = f"{command.get('$db')}.{command['aggregate']}"
        return self.cursor(docs, ns, (command.get("cursor") or {}).get("batchSize"))

    def cmd_distinct(self, command: dict) -> dict:
        coll = self.collection(command, "distinct")
        return {"values": coll.distinct(command["key"], command.get("query") or {})}

    def cmd_count(self, command: dict) -> dict:
        return {"n": self.collection(command, "count").count_documents(command.get("query") or {})}

    def cmd_insert(self, command: dict) -> dict:
        coll = self.collection(command, "insert")
        docs = command.get("documents", [])
        quick = self.quick_inserts and all("_id" in doc for doc in docs) and not self.unique_indexes(coll)
        errors, n = [], 0
        for index, doc in enumerate(docs):
            try:
                if quick:  # unique by _id only: stored as decoded, without mongomock's per-document copies
                    if doc["_id"] in coll._store:
                        raise mongomock.DuplicateKeyError(f"E11000 duplicate key error: _id {doc['_id']!r}", 11000)
                    coll._store[doc["_id"]] = doc
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


def _sections(body: bytes) -> tuple[dict, list[tuple[str, list[dict]]]]:
    """An OP_MSG body: flag bits, then sections (kind 0: the command; kind 1: a named document sequence)."""
    (flags,) = struct.unpack_from("<I", body, 0)
    end = len(body) - (4 if flags & 1 else 0)  # checksumPresent
    offset, command, sequences = 4, None, []
    while offset < end:
        kind = body[offset]
        offset += 1
        (size,) = struct.unpack_from("<i", body, offset)
        if kind == 0:
            command = bson.decode(body[offset : offset + size], CODEC)
        else:
            name_end = body.index(b"\x00", offset + 4)
            name = body[offset + 4 : name_end].decode()
            docs = bson.decode_all(body[name_end + 1 : offset + size], CODEC)
            sequences.append((name, docs))
        offset += size
    return command or {}, sequences


def _read(conn: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def _serve_in_child(conn: Any) -> None:
    from . import idlookup

    idlookup.install()
    server = WireServer(quick_inserts=True).start()
    conn.send(server.uri)
    threading.Event().wait()


class WireProcess:
    """A WireServer in a process of its own (`with WireProcess() as uri:`), so that the stand-in's CPU (mongomock's
    queries, BSON on its side) is not spent in the process being measured: `collector bench` measures the
    engine with the database out of process this way when no real MongoDB is given. Its inserts are quick
    (`quick_inserts`: into a collection unique by `_id` only, a document is stored as decoded, 80 µs less each
    than mongomock's insert) and its `_id` queries looked up (idlookup.py), so that the collector does not wait
    on the stand-in far longer than on a MongoDB."""

    def __init__(self) -> None:
        self.process: Any = None

    def __enter__(self) -> str:
        self.process, pipe = spawn(_serve_in_child, daemon=True)
        try:
            return str(answer(pipe, timeout=60))
        except NoAnswer as exc:
            self.process.terminate()
            self.process.join(timeout=10)
            code = self.process.exitcode
            raise RuntimeError(f"mongowire: the database process did not start: {exc} (exit code {code})") from None

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="serve an in-memory MongoDB stand-in (mongomock) on 127.0.0.1")
    parser.add_argument("--port", type=int, default=27017)
    args = parser.parse_args(argv)
    server = WireServer(args.port).start()
    print(f"mongowire: {server.uri}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
