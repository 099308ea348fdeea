"""Settings: one typed object, loaded once at the entry point and passed down.

Precedence, lowest first: defaults, then a TOML file (``--config``, ``IMGWARM_CONFIG`` or
``./imgwarm.toml``), then ``IMGWARM_<NAME>`` environment variables, then explicit overrides
(CLI options, API keyword arguments).
"""

from __future__ import annotations

from imgwarm.config.settings import Format, Settings, load_settings

__all__ = ["Format", "Settings", "load_settings"]
