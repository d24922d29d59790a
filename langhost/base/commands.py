"""What LangHost's management commands share."""

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

NOT_MIGRATED = ("The database has no LangHost tables yet (a data dir never served): run "
                "`manage.py migrate`, or start LangHost once with `make run`, first.")


def migrations_pending() -> bool:
    executor = MigrationExecutor(connection)
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


class DatabaseCommand(BaseCommand):
    """A command that reads or writes LangHost's database: on a database never migrated it
    says so, instead of ending in a traceback."""

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except DatabaseError as exc:
            if migrations_pending():
                raise CommandError(NOT_MIGRATED) from exc
            raise
