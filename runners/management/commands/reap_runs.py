
from langhost.base.commands import DatabaseCommand
from ledger.services.leases import reap_stale_runs_sync


class Command(DatabaseCommand):
    help = ("Fail `running` runs whose owner is gone: a process of this host that no longer "
            "runs, or any owner whose lease ran out.")

    def handle(self, *args, **options):
        reaped = reap_stale_runs_sync()
        for run_id in reaped:
            self.stdout.write(f"failed stale run {run_id}")
        self.stdout.write(f"{len(reaped)} stale run(s) reaped.")
