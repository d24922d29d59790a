# The shared fixtures live in tests/conftest.py (pytest only loads a conftest for the
# tests below it, so this package imports them explicitly).
from tests.conftest import *  # noqa: F403
