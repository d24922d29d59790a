from django.core.management.base import BaseCommand

from ledger.services import rollups


class Command(BaseCommand):
    help = ("Recompute the rollups (each agent's completed runs, tokens and cost) from the "
            "ledger: after a restore, or to check them.")

    def handle(self, *args, **options):
        agents = rollups.rebuild()
        self.stdout.write(f"rebuilt the totals of {agents} agent(s)")
