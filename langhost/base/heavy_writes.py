"""Where a request's heavy writes run: a small pool of threads of their own.

The process's one sync thread (`langhost.handlers`) starts and ends every run; a write that
can take long (a conversation's whole state) runs here instead, so one user's large write
never holds up another user's run. `LANGHOST_HEAVY_WRITE_THREADS` bounds how many run at
once; more wait their turn here, not on the shared thread.
"""

import concurrent.futures

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.LANGHOST_HEAVY_WRITE_THREADS,
            thread_name_prefix="langhost-heavy-write")
    return _pool


def _in_a_request_cycle(function, *args, **kwargs):
    # A pool thread outlives requests: its connections are tidied as a request's would be.
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


async def heavy_write(function, *args, **kwargs):
    """`function(*args, **kwargs)`, run in the heavy-write pool."""
    return await sync_to_async(_in_a_request_cycle, thread_sensitive=False,
                               executor=_executor())(function, *args, **kwargs)
