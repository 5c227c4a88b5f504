"""likeastore-collector: collects what people like, star and favourite, into MongoDB.

The library API: `run_once(db, mode, settings=None, now=None, instance_id=None)` runs one claim-and-run cycle of a
mode against a pymongo Database; `load_settings(environ=None, cwd=None, env=None, read_dotenv=True)` reads the
settings. See docs/ARCHITECTURE.md.

Its names are loaded on first use (PEP 562): `import collector.sdk`, what a connector imports, loads neither the
engine nor pymongo.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .engine import Collector, Report, run_once
    from .settings import Settings, SettingsError, load_settings

_LAZY = {  # the library API: name -> the module that defines it
    "Collector": "collector.engine",
    "Report": "collector.engine",
    "run_once": "collector.engine",
    "Settings": "collector.settings",
    "SettingsError": "collector.settings",
    "load_settings": "collector.settings",
}

__all__ = ["Collector", "Report", "Settings", "SettingsError", "load_settings", "run_once", "__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'collector' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
