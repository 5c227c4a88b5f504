"""likeastore-collector: collects what people like, star and favourite, into MongoDB."""
from .settings import Settings, SettingsError, load_settings

__version__ = "0.1.0"
__all__ = ["Collector", "Report", "Settings", "SettingsError", "load_settings", "run_once", "__version__"]


def __getattr__(name: str):
    # The engine imports the connectors, which import collector.errors: load it on first use, not at import.
    if name in ("Collector", "Report", "run_once"):
        from . import engine
        return getattr(engine, name)
    raise AttributeError(name)
