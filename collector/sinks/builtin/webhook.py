"""The `webhook` sink: each batch POSTed as one JSON message, signed as Standard Webhooks says
(https://www.standardwebhooks.com/).

The message: `{"type": "items.created", "timestamp": <when the batch was formed, ISO 8601, UTC>, "data": [{"id":
<item id>, ...its fields}, ...]}` (a field `id` of the item's own is replaced by the item's id): nothing in it
changes from one try to the next. Headers: `webhook-id` (`msg_` and the batch's id, which the service keeps for every
retry of the batch, so a receiver can drop a repeat), `webhook-timestamp` (integer seconds, this try's) and
`webhook-signature`: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret (SECRET,
`whsec_<base64>` as Standard Webhooks gives it: the key is the base64 after the prefix, 24 to
64 bytes; any other form is refused with the settings, before anything starts).

The receiver's answer decides, for the whole batch: 2xx done (whatever its body's size: it is read and dropped);
413 TooLarge; 401/403 AuthFailed; any other status BatchRefused (tried again after a back-off, as long as it takes;
a Retry-After read): 429, 5xx, 408, a redirect (never followed) and every other 4xx alike. A whole-request answer
names no document: a missing route during a deploy, a proxy's 404, an endpoint moved with a 308 must not
dead-letter the items, so no answer of a webhook receiver ever rejects a document (a receiver that cannot take an
item answers 2xx and drops it itself).

The URL is a user host (`checks_addresses`): https, and only public addresses are connected to, unless
ALLOW_PRIVATE_HOSTS (sinks/http.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from ..sdk import (
    DONE,
    Batch,
    BatchRefused,
    Doc,
    Option,
    Outcome,
    SettingsError,
    Sink,
    SinkConfig,
    TooLarge,
    answer_failure,
    json_headers,
    retry_after,
    where,
)
from ._common import setting

EVENT = "items.created"
SECRET_PREFIX = "whsec_"
KEY_BYTES = (24, 64)  # a secret's key, decoded, as Standard Webhooks bounds it


def secret_key(secret: str) -> bytes:
    """The key of a Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 bytes; ValueError saying what
    is wrong, never quoting it (the SECRET option's check, made before anything starts)."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"must be {SECRET_PREFIX} and a base64 key, as Standard Webhooks gives it")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            f"must be {SECRET_PREFIX} and a base64 key: what follows {SECRET_PREFIX} is not base64"
        ) from None
    if not KEY_BYTES[0] <= len(key) <= KEY_BYTES[1]:
        low, high = KEY_BYTES
        raise ValueError(f"its key must be {low} to {high} bytes (Standard Webhooks), not {len(key)}")
    return key


class WebhookSink(Sink):
    kind = "webhook"
    checks_addresses = True
    options = (
        Option(
            "SECRET",
            "the signing secret, whsec_<base64 of 24 to 64 bytes>",
            secret=True,
            required=True,
            check=secret_key,
        ),
    )

    def __init__(self, config: SinkConfig, http: Any):
        super().__init__(config, http)
        self.key = signing_key(config, self.option("SECRET"))
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def deliver(self, batch: Sequence[Doc]) -> Sequence[Outcome]:
        url = self.config.url
        what = f"POST {where(url)}"
        now = self.clock()
        formed = batch.formed if isinstance(batch, Batch) and batch.formed is not None else now
        data = [{"id": doc.id, **{k: v for k, v in doc.body.items() if k not in ("id", "_id")}} for doc in batch]
        body = orjson.dumps({"type": EVENT, "timestamp": iso(formed), "data": data})  # the same bytes at each try
        if len(body) > self.max_batch_bytes:  # the service splits the batch; a single document too large: rejected
            raise TooLarge(f"batch of {len(body)} bytes over the {self.max_batch_bytes}-byte limit: {what}")
        headers = json_headers(extra=sign(self.key, message_id(batch), int(now.timestamp()), body))
        answer = self.http.request("POST", url, body=body, headers=headers, keep_body=False)  # a 2xx's body: dropped
        if 200 <= answer.status < 300:
            return [DONE] * len(batch)
        failure = answer_failure(answer, what, now)  # 401/403, 413, 408/429/5xx, a redirect (not followed)
        if failure is not None:
            raise failure
        # any other status (404, 400, 409, 410, 422, ...) is about the request, not one document: refused for now
        raise BatchRefused(f"{answer.status}: batch refused by the receiver: {what}", retry_after(answer.headers, now))


def signing_key(config: SinkConfig, secret: str) -> bytes:
    """The HMAC key a `whsec_<base64>` secret stands for; SettingsError (not quoting it) when it is not one."""
    try:
        return secret_key(secret)
    except ValueError as exc:
        raise SettingsError(setting(config, "SECRET"), str(exc)) from None


def message_id(batch: Sequence[Doc]) -> str:
    """`msg_` and the batch's id (the same at every retry of the batch: the service keeps it in MongoDB); for
    documents handed over without one, a digest of their ids in order."""
    if isinstance(batch, Batch) and batch.id:
        return f"msg_{batch.id}"
    digest = hashlib.sha256("\n".join(doc.id for doc in batch).encode()).digest()[:18]
    return "msg_" + base64.urlsafe_b64encode(digest).decode()


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of a message."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": f"v1,{signature}"}


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
