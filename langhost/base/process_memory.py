"""What a long-lived process (`serve`, a runtime worker) does with its memory once started."""

import ctypes
import gc

# How many more container objects than were freed make the collector look at the young ones.
# Python's default (700) had the web process collect every few runs under load, each time
# walking the objects of the requests in flight; nearly all of them die by their reference
# count anyway.
YOUNG_COLLECTION_THRESHOLD = 10_000


def settle_after_startup() -> None:
    """Migrating renders every model's historical states once: garbage the process would keep
    as resident memory for its whole life. Collected, and the C heap's free pages handed back
    to the system (glibc's `malloc_trim`; elsewhere the collection alone). What is left (the
    modules, models and URLconf kept for the process's life) is moved out of the cyclic
    collector's sight (`gc.freeze`): every full collection under load walked all of it again.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    process = ctypes.CDLL(None)  # the symbols the process has loaded, the C library's among them
    if hasattr(process, "malloc_trim"):
        process.malloc_trim(0)
