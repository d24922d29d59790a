import asyncio

from langhost.base.commands import DatabaseCommand
from runners.webhooks import services


class Command(DatabaseCommand):
    help = ("Send the webhook deliveries due now (where the serving process does not: "
            "LANGHOST_WEBHOOK_DELIVERY=false).")

    def handle(self, *args, **options):
        sent = asyncio.run(services.deliver_due())
        self.stdout.write(f"{sent} delivery attempt(s) made.")
