"""likeastore-collector: collects what people like, star and favourite, into MongoDB.

The library API: `run_once(db, mode, settings=None, now=None, instance_id=None)` runs one claim-and-run cycle of a
mode against a pymongo Database; `load_settings(environ=None, cwd=None, env=None, read_dotenv=True)` reads the
settings. See docs/ARCHITECTURE.md.
"""

__version__ = "0.1.0"

from .engine import Collector, Report, run_once  # noqa: E402
from .settings import Settings, SettingsError, load_settings  # noqa: E402

__all__ = ["Collector", "Report", "Settings", "SettingsError", "load_settings", "run_once", "__version__"]
