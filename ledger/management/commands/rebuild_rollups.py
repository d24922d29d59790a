
from langhost.base.commands import DatabaseCommand
from ledger.services import rollups


class Command(DatabaseCommand):
    help = ("Recompute the rollups (each agent's completed runs, tokens and cost; the "
            "dashboard's runs by hour and model calls by day) from the ledger: after a "
            "restore, or to check them.")

    def handle(self, *args, **options):
        rows = rollups.rebuild()
        self.stdout.write(f"rebuilt {rows} rollup row(s)")
