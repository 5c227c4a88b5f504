"""The `opensearch` sink: items indexed into OpenSearch (or Elasticsearch 7 and later) with the bulk API.

One POST {URL}/_bulk per batch, NDJSON: `{"index": {"_index": INDEX, "_id": <item id>}}` then the item's fields
(no `_id` in the body, no `_type`). Indexing is by id, so delivering an item again replaces it with itself.

Per document, from the bulk answer's `items` (one per document, in order): 2xx done; 409 (a version conflict: the
index holds a newer version) done; 429 and 5xx retried; 400, 404 and any other 4xx rejected with the error's type
and reason. For the whole request: 401/403 AuthFailed, 413 TooLarge, 429/5xx, a connection failure, an answer
that is not a bulk answer for this batch, any other status (a wrong URL, a request the cluster cannot read: about
no document in particular, so none is dead-lettered for it): BatchRefused.

Options: INDEX (default `items`), TEMPLATE (a JSON index template file, read when the sink is made and put as
`_index_template/likeastore-<INDEX>` before the first delivery; its `index_patterns` default to the index),
USERNAME and PASSWORD (basic authentication) or API_KEY (`Authorization: ApiKey <API_KEY>`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ...net.urls import where
from ...settings import SettingsError
from ..http import answer_failure, json_headers, scrub
from ..sdk import DONE, AuthFailed, BatchRefused, Doc, Option, Outcome, Reject, Retry, Sink, SinkConfig
from ._common import dumps, error_text, json_answer, lines, setting, within

INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9_.+-]{0,199}")  # OpenSearch's rules, less date math
TEMPLATE_BYTES = 1024 * 1024


class OpenSearchSink(Sink):
    kind = "opensearch"
    options = (
        Option("INDEX", "the index the items are written to", default="items"),
        Option("TEMPLATE", "path of a JSON index template put before the first delivery (optional)"),
        Option("USERNAME", "user name for basic authentication (optional)"),
        Option("PASSWORD", "password for basic authentication", secret=True),
        Option(
            "API_KEY", "an API key, sent as Authorization: ApiKey (optional; instead of USERNAME/PASSWORD)", secret=True
        ),
    )

    def __init__(self, config: SinkConfig, http: Any):
        super().__init__(config, http)
        self.base = config.url.rstrip("/")
        self.index = self.option("INDEX") or "items"
        if not INDEX_NAME.fullmatch(self.index) or self.index in (".", ".."):
            raise SettingsError(setting(config, "INDEX"), "must be a lower-case index name ([a-z0-9_.+-])")
        self.template = read_template(config, self.option("TEMPLATE"), self.index)
        self.auth = auth_headers(config, self.option("USERNAME"), self.option("PASSWORD"), self.option("API_KEY"))

    def prepare(self) -> None:
        if self.template is not None:
            url = f"{self.base}/_index_template/likeastore-{self.index}"
            answer = self.http.request("PUT", url, body=dumps(self.template), headers=json_headers(extra=self.auth))
            failure = answer_failure(answer, f"PUT {where(url)}")
            if failure is not None:
                raise failure
            if not 200 <= answer.status < 300:
                reason = scrub(error_text(answer_error(answer.body)), self.config)
                raise BatchRefused(f"{answer.status}: index template refused: {reason}: PUT {where(url)}")
        url = f"{self.base}/{self.index}"
        answer = self.http.request("HEAD", url, headers=json_headers(extra=self.auth))
        if answer.status == 401:  # a 403 may only say the writer may not look at the index: deliver will tell
            raise AuthFailed(f"401: credentials refused: HEAD {where(url)}")
        failure = answer_failure(answer, f"HEAD {where(url)}")
        if failure is not None and answer.status != 403:
            raise failure

    def deliver(self, batch: Sequence[Doc]) -> Sequence[Outcome]:
        url = f"{self.base}/_bulk"
        what = f"POST {where(url)}"
        body = within(lines(self._rows(batch)), self.max_batch_bytes, what)
        headers = json_headers("application/x-ndjson", self.auth)
        answer = self.http.request("POST", url, body=body, headers=headers)
        failure = answer_failure(answer, what)
        if failure is not None:
            raise failure
        if not 200 <= answer.status < 300:  # a wrong URL or our own mistake, never one document's: nothing is lost
            reason = scrub(error_text(answer_error(answer.body)), self.config)
            raise BatchRefused(f"{answer.status}: {reason}: {what}")
        return [self._outcome(item) for item in bulk_items(json_answer(answer, what), batch, what)]

    def _rows(self, batch: Sequence[Doc]) -> Any:
        for doc in batch:
            yield {"index": {"_index": self.index, "_id": doc.id}}
            yield {name: value for name, value in doc.body.items() if name not in ("_id", "_type")}

    def _outcome(self, result: Mapping[str, Any]) -> Outcome:
        status = result["status"]
        if 200 <= status < 300 or status == 409:  # 409: a version conflict, the index holds a newer version
            return DONE
        reason = scrub(f"{status}: {error_text(result.get('error'))}", self.config)
        if status == 429 or status >= 500:
            return Retry(reason)
        return Reject(reason)


def bulk_items(data: Any, batch: Sequence[Doc], what: str) -> list[Mapping[str, Any]]:
    """The per-document results of a bulk answer, checked to be one per document of `batch`, in order."""
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != len(batch):
        count = len(items) if isinstance(items, list) else "no"
        raise BatchRefused(f"a bulk answer with {count} results for {len(batch)} documents: {what}")
    results: list[Mapping[str, Any]] = []
    for item, doc in zip(items, batch, strict=True):
        result = next(iter(item.values()), None) if isinstance(item, dict) and len(item) == 1 else None
        if not isinstance(result, dict) or type(result.get("status")) is not int or result.get("_id") != doc.id:
            raise BatchRefused(f"a bulk answer whose results do not match the documents sent: {what}")
        results.append(result)
    return results


def answer_error(body: bytes) -> object:
    """The `error` of an error answer (`{"error": {"type", "reason"}}`), or its first line of text."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:300].decode("utf-8", "replace").splitlines()[0] if body.strip() else "no reason given"
    return data.get("error", data) if isinstance(data, dict) else data


def read_template(config: SinkConfig, path: str, index: str) -> dict[str, Any] | None:
    """The index template file's JSON object (its index_patterns defaulting to [index]); SettingsError when it
    cannot be read or is not a JSON object."""
    if not path:
        return None
    name = setting(config, "TEMPLATE")
    try:
        with open(Path(path).expanduser(), "rb") as file:
            text = file.read(TEMPLATE_BYTES + 1)
    except OSError as exc:
        raise SettingsError(name, f"cannot read the index template file: {exc.strerror or exc}") from None
    if len(text) > TEMPLATE_BYTES:
        raise SettingsError(name, f"the index template file is over {TEMPLATE_BYTES} bytes")
    try:
        template = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SettingsError(name, f"the index template file is not JSON ({exc})") from None
    if not isinstance(template, dict):
        raise SettingsError(name, "the index template file must hold a JSON object")
    template.setdefault("index_patterns", [index])
    return template


def auth_headers(config: SinkConfig, username: str, password: str, api_key: str) -> dict[str, str]:
    if api_key and (username or password):
        raise SettingsError(setting(config, "API_KEY"), "give either USERNAME and PASSWORD or API_KEY, not both")
    if api_key:
        return {"Authorization": f"ApiKey {api_key}"}
    if password and not username:
        raise SettingsError(setting(config, "USERNAME"), "required with a PASSWORD")
    if username:
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
    return {}
