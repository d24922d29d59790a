"""Wall-clock limits in tests, scaled by one factor.

Every timeout a test waits on and every duration it asserts is multiplied by `time_factor()`:
`LANGHOST_TEST_TIME_FACTOR` when set; else how busy the machine is now, read when the limit
is: the share of the last ten seconds that runnable tasks waited for a CPU (the kernel's
pressure stall information), or the load per CPU over the last minute if that is higher (a
machine that stays busy), never below 1 and at most `MAX_LOAD_FACTOR`. So a suite beside
another one, or beside any busy work, waits as much longer as the machine is slower. Set it to
pin the factor, e.g. `LANGHOST_TEST_TIME_FACTOR=3 make test` on a slow machine.
"""

import os
from pathlib import Path

MAX_LOAD_FACTOR = 4.0
CPU_PRESSURE = Path("/proc/pressure/cpu")


def _stalled_share() -> float:
    """The share (0..1) of the last 10 s in which some runnable task waited for a CPU."""
    try:
        some = CPU_PRESSURE.read_text().splitlines()[0]
    except (OSError, IndexError):  # a kernel without PSI
        return 0.0
    fields = dict(field.split("=") for field in some.split()[1:])
    return float(fields.get("avg10", 0.0)) / 100


def time_factor() -> float:
    if given := os.environ.get("LANGHOST_TEST_TIME_FACTOR"):
        return float(given)
    # A task that waits for a CPU a share s of the time runs 1 / (1 - s) times slower.
    by_pressure = 1 / max(1 - _stalled_share(), 1 / MAX_LOAD_FACTOR)
    by_load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(MAX_LOAD_FACTOR, max(1.0, by_pressure, by_load))


def scaled(seconds: float) -> float:
    """`seconds` as a test's wall-clock limit: times `time_factor()`, read now."""
    return seconds * time_factor()


def well_before(seconds: float) -> float:
    """A bound telling "ended at once" from "waited `seconds` out" (a slow runner's sleep, a
    timeout): a third of them, which a machine even four times slower stays under."""
    return seconds / 3
