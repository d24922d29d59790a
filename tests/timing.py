"""Wall-clock limits in tests, scaled by one factor.

Every timeout a test waits on and every duration it asserts is multiplied by `time_factor()`:
`LANGHOST_TEST_TIME_FACTOR` (default 1). Raise it where the machine is slow or busy, e.g.
`LANGHOST_TEST_TIME_FACTOR=3 make test` beside another test run.
"""

import os


def time_factor() -> float:
    return float(os.environ.get("LANGHOST_TEST_TIME_FACTOR") or 1)


def scaled(seconds: float) -> float:
    """`seconds` as a test's wall-clock limit: times `time_factor()`."""
    return seconds * time_factor()
