"""Where heavy writes run: small pools of threads of their own.

The process's one sync thread (`langhost.handlers`) starts and ends every run; a write that
can take long (a conversation's whole state) runs here instead, so one user's large write
never holds up another user's run. `LANGHOST_HEAVY_WRITE_THREADS` bounds how many of a
request's run at once; more wait their turn here, not on the shared thread. Background work's
writes (knowledge ingestion's chunks) have a thread of their own (`background_write`), so
they never take a request's turn.
"""

import concurrent.futures

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

_pools: dict[str, concurrent.futures.ThreadPoolExecutor] = {}


def _executor(name: str, threads: int) -> concurrent.futures.ThreadPoolExecutor:
    if name not in _pools:
        _pools[name] = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=f"langhost-{name}")
    return _pools[name]


def _in_a_request_cycle(function, *args, **kwargs):
    # A pool thread outlives requests: its connections are tidied as a request's would be.
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


async def _run_in(executor, function, *args, **kwargs):
    return await sync_to_async(_in_a_request_cycle, thread_sensitive=False,
                               executor=executor)(function, *args, **kwargs)


async def heavy_write(function, *args, **kwargs):
    """`function(*args, **kwargs)`, run in the requests' heavy-write pool."""
    return await _run_in(_executor("heavy-write", settings.LANGHOST_HEAVY_WRITE_THREADS),
                         function, *args, **kwargs)


async def background_write(function, *args, **kwargs):
    """`function(*args, **kwargs)`, run on background work's own write thread."""
    return await _run_in(_executor("background-write", 1), function, *args, **kwargs)
