import os
import sys

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Apply migrations, make sure an admin exists, and serve LangHost with daphne."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("LANGHOST_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("LANGHOST_PORT", "8000")))

    def handle(self, *args, host, port, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database is up to date.")
        call_command("ensure_admin")
        url = f"http://{host}:{port}"
        self.stdout.write(self.style.SUCCESS(f"LangHost is serving at {url}/"))
        self.stdout.write(f"  admin:    {url}/admin/  (sign in with the admin account's email)")
        self.stdout.write(f"  API docs: {url}/api/docs/")
        sys.stdout.flush()
        # Replace this process with daphne so signals reach the server directly.
        os.execvp(
            sys.executable,
            [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), "langhost.asgi:application"],
        )
