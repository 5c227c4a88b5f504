"""A MongoDB stand-in on a loopback socket: mongomock behind the wire protocol.

No MongoDB server can be installed on our build machines, yet some promises are about a real process talking to
a real socket (a database outage under a running daemon, several collectors sharing one database). `WireServer`
listens on 127.0.0.1, answers pymongo's handshake (OP_QUERY and OP_MSG) as a standalone MongoDB 7.0 without
sessions, and runs the commands the collector and its tools send — find/getMore/killCursors, aggregate, count,
insert, update, delete, distinct, createIndexes, listIndexes, dropIndexes, drop, ping — against one in-memory
mongomock client, under one lock (mongomock is not thread-safe). `stop()` closes the listener and every
connection (the database is "down"); `start()` listens again on the same port with the same data (it "comes
back").

The commands themselves are mongocommands.py's; this module speaks the wire protocol and keeps the connections.

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
from typing import Any

import bson
import mongomock
from bson.codec_options import CodecOptions

from .mongocommands import MAX_MESSAGE, Commands
from .spawned import NoAnswer, answer, spawn

OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013
HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode
CODEC: CodecOptions = CodecOptions(tz_aware=False)  # mongomock keeps naive UTC datetimes; the client decides awareness


class WireServer:
    """Serve a mongomock client on 127.0.0.1:port (0 picks a free port, kept across stop/start)."""

    def __init__(self, port: int = 0, client: Any = None, quick_inserts: bool = False):
        self.client = client if client is not None else mongomock.MongoClient()
        self.database = Commands(self.client, quick_inserts)
        self.port = port
        self.listener: socket.socket | None = None
        self.connections: set[socket.socket] = set()
        self.connection_ids = itertools.count(1)

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

    def run(self, command: dict, sequences: list[tuple[str, list[dict]]], connection_id: int = 0) -> dict:
        """One command's answer (mongocommands.py)."""
        return self.database.run(command, sequences, connection_id)

    @property
    def commands(self) -> int:
        """Commands run since the start."""
        return self.database.count


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
