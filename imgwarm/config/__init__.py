"""Settings: one typed root, in groups (image, store, queue, cache, events), loaded once at
the entry point.

Sources, first wins: explicit overrides (CLI options, API keyword arguments), ``IMGWARM_*``
environment variables, a TOML file (``--config``, ``IMGWARM_CONFIG`` or ``./imgwarm.toml``),
defaults. Every setting has one flat public name; the groups are how the code reads them.
"""

from __future__ import annotations

from imgwarm.config.cache import CacheSettings
from imgwarm.config.events import EventsSettings
from imgwarm.config.image import ImageSettings
from imgwarm.config.queue import QueueSettings, masked_url
from imgwarm.config.settings import GROUPS, Settings, describe_field, load_settings
from imgwarm.config.store import StoreSettings

__all__ = ["GROUPS", "CacheSettings", "EventsSettings", "ImageSettings", "QueueSettings",
           "Settings", "StoreSettings", "describe_field", "load_settings", "masked_url"]
