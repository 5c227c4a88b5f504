"""An application's client secret that `collector connect` remembers (Mastodon's, per instance, in `connectApps`),
sealed at rest like the networks' tokens when TOKEN_KEY is set (engine/store/sealing.py), bound to the instance."""

from __future__ import annotations

from ..engine.store.sealing import Keys, SealError, is_sealed, open_value, seal_value
from ..settings import Settings

FIELD = "clientSecret"


def app_keys(settings: Settings) -> Keys:
    return Keys.from_settings(settings)


def sealed_secret(plain: str, *, instance: str, keys: Keys | None) -> str:
    """What to store: `plain` sealed for this instance with the current key; plain without a key."""
    if keys is None or keys.current is None:
        return plain
    return seal_value(plain, network_id=instance, name=FIELD, keys=keys)


def opened_secret(stored: str, *, instance: str, keys: Keys | None) -> str | None:
    """The plain secret of a stored one (plain as written by a collector without a key, or sealed); None when a
    sealed one cannot be opened (no key, or not among the keys): the application is then registered again."""
    if not is_sealed(stored):
        return stored
    if keys is None:
        return None
    try:
        return open_value(stored, network_id=instance, name=FIELD, keys=keys)
    except SealError:
        return None
