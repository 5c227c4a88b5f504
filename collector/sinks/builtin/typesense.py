"""The `typesense` sink: items imported into a Typesense collection (0.24 and later), upserted by id.

prepare() creates the collection (COLLECTION, default `items`) when it is missing, with an automatic schema (every
field `.*` of type `auto`, nested objects indexed: `enable_nested_fields`). One POST
/collections/<COLLECTION>/documents/import?action=upsert per batch, JSON lines, each document the item's fields with
`id` = the item's id; what Typesense cannot index at all is made indexable first (`indexable`): an array holding
null loses its nulls, an array mixing types or holding arrays becomes an array of texts.

Per document, from the answer's lines (one per document, in order): `{"success": true}` done; false: retried when
its code is 429 or 5xx (or it says it is transient), else rejected with its error (never the document Typesense
echoes). For the whole request: 401/403 AuthFailed, 413 TooLarge, 429/5xx, a connection failure, an answer with
another count of lines, any other status (422 while the server skips writes: about no document in particular):
BatchRefused; a 404 (the collection is gone): created again, BatchRefused for now.

Options: COLLECTION (default `items`), API_KEY (required; the X-TYPESENSE-API-KEY header).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import orjson

from ...net.urls import where
from ...settings import SettingsError
from ..http import answer_failure, json_headers, scrub
from ..sdk import DONE, BatchRefused, Doc, Option, Outcome, Reject, Retry, Sink, SinkConfig
from ._common import dumps, lines, setting, with_id, within

COLLECTION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
SCHEMA_FIELDS = [{"name": ".*", "type": "auto"}]
TRANSIENT = ("not ready", "lagging", "rate limit", "too many requests", "timed out", "temporarily")


class TypesenseSink(Sink):
    kind = "typesense"
    options = (
        Option("COLLECTION", "the collection the items are imported into", default="items"),
        Option(
            "API_KEY", "an API key allowed to create the collection and import documents", secret=True, required=True
        ),
    )

    def __init__(self, config: SinkConfig, http: Any):
        super().__init__(config, http)
        self.base = config.url.rstrip("/")
        self.collection = self.option("COLLECTION") or "items"
        if not COLLECTION_NAME.fullmatch(self.collection):
            raise SettingsError(setting(config, "COLLECTION"), "must be a collection name ([A-Za-z0-9_.-])")
        api_key = self.option("API_KEY")
        if not api_key:
            raise SettingsError(setting(config, "API_KEY"), "required")
        self.auth = {"X-TYPESENSE-API-KEY": api_key}
        self.path = f"/collections/{quote(self.collection, safe='')}"
        self.lock = threading.Lock()

    def prepare(self) -> None:
        url = self.base + self.path
        answer = self.http.request("GET", url, headers=json_headers(extra=self.auth))
        failure = answer_failure(answer, f"GET {where(url)}")
        if failure is not None:
            raise failure
        if answer.status == 404:
            self._create()
        elif answer.status != 200:
            raise BatchRefused(f"{answer.status}: the collection cannot be read: GET {where(url)}")

    def _create(self) -> None:
        url = f"{self.base}/collections"
        schema = {"name": self.collection, "fields": SCHEMA_FIELDS, "enable_nested_fields": True}
        with self.lock:  # deliveries in flight that find the collection gone create it once
            answer = self.http.request("POST", url, body=dumps(schema), headers=json_headers(extra=self.auth))
        failure = answer_failure(answer, f"POST {where(url)}")
        if failure is not None:
            raise failure
        if answer.status not in (200, 201, 409):  # 409: made meanwhile by another
            raise BatchRefused(f"{answer.status}: {scrub(self.message(answer.body), self.config)}: POST {where(url)}")

    def deliver(self, batch: Sequence[Doc]) -> Sequence[Outcome]:
        url = f"{self.base}{self.path}/documents/import?action=upsert"
        what = f"POST {where(url)}"
        body = within(lines(indexable(with_id(doc)) for doc in batch), self.max_batch_bytes, what)
        answer = self.http.request("POST", url, body=body, headers=json_headers("text/plain", self.auth))
        failure = answer_failure(answer, what)
        if failure is not None:
            raise failure
        if answer.status == 404:
            self._create()
            raise BatchRefused(f"404: the collection was missing, created again: {what}", retry_after=0.0)
        if answer.status != 200:  # 422 "Skipping writes.", a wrong URL: about no document in particular
            raise BatchRefused(f"{answer.status}: {scrub(self.message(answer.body), self.config)}: {what}")
        results = answer.body.splitlines()
        if len(results) != len(batch):
            raise BatchRefused(f"an import answer of {len(results)} lines for {len(batch)} documents: {what}")
        return [self._outcome(parse_line(line, what)) for line in results]

    def _outcome(self, result: dict[str, Any]) -> Outcome:
        if result.get("success") is True:
            return DONE
        code = result.get("code")
        error = str(result.get("error") or "refused")
        reason = scrub(f"{code}: {error}" if isinstance(code, int) else error, self.config)
        if (isinstance(code, int) and (code == 429 or code >= 500)) or any(w in error.lower() for w in TRANSIENT):
            return Retry(reason)
        return Reject(reason)

    def message(self, body: bytes) -> str:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return "no reason given"
        return str(data.get("message", "no reason given")) if isinstance(data, dict) else "no reason given"


def parse_line(line: bytes, what: str) -> dict[str, Any]:
    try:
        result = orjson.loads(line)
    except orjson.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        raise BatchRefused(f"an import answer line that is not a JSON object: {what}")
    return result


def indexable(value: Any) -> Any:
    """`value` with what Typesense cannot index made indexable (measured on 0.24.1): nulls dropped from arrays; an
    array whose items are not all of one kind (texts, numbers, booleans, objects), or that holds arrays, made an
    array of texts (JSON for objects and arrays). Nested objects are kept (the collection indexes them)."""
    if isinstance(value, dict):
        return {name: indexable(item) for name, item in value.items()}
    if not isinstance(value, list):
        return value
    items = [item for item in value if item is not None]
    kinds = {kind_of(item) for item in items}
    if len(kinds) > 1 or "array" in kinds:
        return [item if isinstance(item, str) else dumps(item).decode() for item in items]
    return [indexable(item) for item in items]


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "object"
    return "array"
