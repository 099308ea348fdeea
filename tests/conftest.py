"""The fixtures every folder shares come from tests/support/fixtures.py; the helpers the tests
import live in tests/support/ (conftest.py files hold fixtures only)."""

import pytest

# Plain asserts in the support modules report their values, as in a test.
pytest.register_assert_rewrite("tests.support")

pytest_plugins = ["tests.support.fixtures", "tests.support.alone", "tests.support.signals"]
