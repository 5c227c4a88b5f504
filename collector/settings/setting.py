"""The record of one setting (`Setting`) and of a family of per-service settings (`Family`), and what a reload does
with each; declaration.py declares every setting with them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .parsers import Kind

# What a reload (SIGHUP) does with a new value (collector/lifecycle.py, engine Collector.apply_settings, the observers'
# on_settings):
YES = "yes"  # applied from the loop's next round
KEPT = "kept"  # kept as it was until a restart; the reload's warning names it
RELOADS = {
    YES: "applied from the loop's next round",
    KEPT: "kept as it was until a restart; the reload's warning names it",
}


@dataclass(frozen=True)
class Setting:
    """One setting. `field` is the Settings field it fills ("": none, a connector reads it with Settings.get)."""

    name: str
    field: str
    kind: Kind
    default: str
    help: str
    secret: bool = False
    reload: str = YES
    details: str = ""


@dataclass(frozen=True)
class Family:
    """Settings one per service, NAME_<SERVICE>, falling back to `fallback`; `extras` are the (service, value,
    note) that config/defaults.env sets."""

    prefix: str
    field: str
    kind: Kind
    fallback: str
    help: str
    extras: tuple[tuple[str, str, str], ...] = ()
    reload: str = YES

    @property
    def name(self) -> str:
        return f"{self.prefix}<SERVICE>"

    @property
    def pattern(self) -> re.Pattern[str]:
        """Matches NAME_<SERVICE>; group 1 is the service's name in capitals."""
        return re.compile(rf"^{re.escape(self.prefix)}([A-Z0-9_]+)$")
