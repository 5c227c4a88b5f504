"""The settings of one sink, SINK_<NAME>_<FIELD>, declared once like the others (declaration.py): the fields every
sink takes, whatever its kind. A kind's own settings (an index, a key, a secret) are the `Option`s its class
declares (collector/sinks/sdk.py); collector/sinks/config.py reads both from `Settings.raw` into a SinkConfig for
each name in SINKS, and a bad one is a SettingsError naming it. The reference (reference.py) lists these fields."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import parsers as kinds
from .parsers import Kind

SINK_PREFIX = "SINK_"
FORM = "SINK_<NAME>_"  # how the docs write a per-sink setting: SINK_<NAME>_URL


@dataclass(frozen=True)
class SinkField:
    """One field every sink takes: SINK_<NAME>_<field>."""

    field: str
    kind: Kind
    default: str
    help: str
    required: bool = False

    @property
    def name(self) -> str:
        return FORM + self.field


SINK_FIELDS: tuple[SinkField, ...] = (
    SinkField(
        "KIND",
        kinds.SINK_KIND,
        "",
        "The kind of sink: opensearch, typesense, webhook or a plugin's (empty: the sink's name, if it is a kind).",
    ),
    SinkField("URL", kinds.SINK_URL, "", "Where the sink delivers: the destination's base URL.", required=True),
    SinkField("BATCH", kinds.BATCH, "500", "Documents one delivery carries at most."),
    SinkField("CONCURRENCY", kinds.SINK_CONCURRENCY, "2", "Deliveries in flight to the sink at once."),
    SinkField("TIMEOUT", kinds.POSITIVE_SECONDS, "30", "Bounds one delivery's whole request (connect, send, answer)."),
    SinkField("SERVICES", kinds.NAMES, "", "Only items of these services (comma-separated; empty: every service)."),
    SinkField(
        "BACKFILL",
        kinds.BOOLEAN,
        "true",
        "A sink seen for the first time gets every item stored already (false: only the new ones).",
    ),
    SinkField("PACE", kinds.PACE, "500", "Items per second a backfill or a replay enqueues at most."),
)
BY_FIELD = {f.field: f for f in SINK_FIELDS}


def sink_prefix(name: str) -> str:
    """SINK_<NAME>_ for the sink `name`."""
    return f"{SINK_PREFIX}{name.upper()}_"


def sink_keys(raw: Mapping[str, str], names: Iterable[str]) -> dict[str, dict[str, str]]:
    """The SINK_<NAME>_<FIELD> settings of each named sink: {name: {FIELD: text}}. A setting belongs to the sink
    of the longest name it begins with: with sinks `a` and `a_b`, SINK_A_B_URL is the URL of `a_b`."""
    names = list(names)
    found: dict[str, dict[str, str]] = {name: {} for name in names}
    by_length = sorted(names, key=len, reverse=True)
    for key, value in raw.items():
        if not key.startswith(SINK_PREFIX):
            continue
        owner = next((n for n in by_length if key.startswith(sink_prefix(n)) and len(key) > len(sink_prefix(n))), "")
        if owner:
            found[owner][key[len(sink_prefix(owner)) :]] = value
    return found
