"""likeastore-collector: collects what people like, star and favourite, into MongoDB."""
from .engine import Collector, Report, run_once
from .settings import Settings, SettingsError, load_settings

__version__ = "0.1.0"
__all__ = ["Collector", "Report", "Settings", "SettingsError", "load_settings", "run_once", "__version__"]
