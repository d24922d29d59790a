"""Start-up steps for processes that start together: on PostgreSQL one process at a time, under
an advisory lock, so web processes and runtime workers started side by side don't race to
create the same tables or the same admin; the later ones find nothing left to do."""

from contextlib import contextmanager

from django.db import connection

from langhost.base import migrated_template

# Any constant works: it only has to be the same in every LangHost process.
LOCK_KEY = 0x4C414E47484F5354  # "LANGHOST"


@contextmanager
def one_process_at_a_time():
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def apply_migrations() -> None:
    with one_process_at_a_time():
        migrated_template.migrate()
