"""Wall-clock limits in tests, scaled by one factor.

Every timeout a test waits on and every duration it asserts is multiplied by `time_factor()`:
`LANGHOST_TEST_TIME_FACTOR` when set; else the machine's load per CPU over the last minute
(never below 1, at most `MAX_LOAD_FACTOR`), so a suite beside another one, or beside any busy
work, waits as much longer as the machine is slower. Set it to pin the factor, e.g.
`LANGHOST_TEST_TIME_FACTOR=3 make test` on a slow machine.
"""

import os

MAX_LOAD_FACTOR = 4.0


def time_factor() -> float:
    if given := os.environ.get("LANGHOST_TEST_TIME_FACTOR"):
        return float(given)
    return min(MAX_LOAD_FACTOR, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    """`seconds` as a test's wall-clock limit: times `time_factor()`."""
    return seconds * time_factor()
