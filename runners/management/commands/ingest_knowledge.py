from asgiref.sync import async_to_sync

from langhost.base.commands import DatabaseCommand
from runners.knowledge import worker


class Command(DatabaseCommand):
    help = ("Ingest the knowledge documents waiting in the queue (and those a stopped process "
            "left half-done), then exit. A serving process does this in its background.")

    def handle(self, *args, **options):
        requeued = async_to_sync(worker.requeue_interrupted)()
        taken = async_to_sync(worker.drain)()
        self.stdout.write(f"{taken} document(s) ingested ({requeued} taken up again after a "
                          "stop).")
