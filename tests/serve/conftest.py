"""The cache fixtures (a real tmpfs for the RAM tier) serve here too."""

from tests.cache.conftest import ram  # noqa: F401 (a fixture, by its name)
