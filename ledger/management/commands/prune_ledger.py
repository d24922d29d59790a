from datetime import datetime
from pathlib import Path

from django.core.management.base import CommandError
from django.utils import timezone

from langhost.base.commands import DatabaseCommand
from ledger.services import retention


class Command(DatabaseCommand):
    help = ("Remove ended runs older than LANGHOST_LEDGER_RETENTION_DAYS (or --before) with "
            "their events, transcript lines, model calls and questions, and conversations "
            "left without runs with their files; rollups stay. In batches: no long lock.")

    def add_arguments(self, parser):
        parser.add_argument("--before", help="remove runs created before this date "
                            "(YYYY-MM-DD or an ISO datetime), instead of the setting's limit")
        parser.add_argument("--archive", type=Path, help="first write each removed run, "
                            "with what goes with it, to this gzip-compressed JSON Lines file")
        parser.add_argument("--vacuum", action="store_true", help="SQLite: a full VACUUM "
                            "afterwards (needed once for a file made before auto_vacuum)")

    def handle(self, *args, before=None, archive=None, vacuum=False, **options):
        limit = self._moment(before) if before else retention.cutoff()
        if limit is None:
            raise CommandError("Retention is off: set LANGHOST_LEDGER_RETENTION_DAYS or give "
                               "--before.")
        pruned = retention.prune(limit, archive)
        self.stdout.write(f"removed {pruned.runs} run(s) with {pruned.events} event(s) "
                          f"created before {limit.isoformat()}, and {pruned.conversations} "
                          f"conversation(s) left without runs"
                          + (f"; archived to {pruned.archive}" if pruned.archive else ""))
        self.stdout.write(f"space: {retention.reclaim_space(full=vacuum)}")

    @staticmethod
    def _moment(text: str) -> datetime:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise CommandError(f"--before: '{text}' is not a date (YYYY-MM-DD).") from None
        return moment if timezone.is_aware(moment) else timezone.make_aware(moment)
