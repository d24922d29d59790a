from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _incremental_vacuum_for_new_files(sender, connection, **kwargs):
    """A new SQLite file is made `auto_vacuum=INCREMENTAL` before its first table (the mode
    can only be chosen then): pruning the ledger then gives pages back a few at a time
    (`ledger.services.retention`) instead of a VACUUM that locks writes out. Asked of an
    existing file the pragma would take a write lock on every connection: it is not."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master")
        if cursor.fetchone()[0] == 0:
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cursor.execute("VACUUM")  # an empty file: applies the mode at once


class LedgerConfig(AppConfig):
    name = "ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        connection_created.connect(_incremental_vacuum_for_new_files)
