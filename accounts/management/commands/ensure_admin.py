import os

from accounts.models import User
from langhost.base import process_secrets
from langhost.base.commands import DatabaseCommand


class Command(DatabaseCommand):
    help = (
        "Create the admin account from LANGHOST_ADMIN_EMAIL / LANGHOST_ADMIN_PASSWORD "
        "when both are set and no such user exists yet."
    )

    def handle(self, *args, **options):
        email = os.environ.get("LANGHOST_ADMIN_EMAIL", "").strip().lower()
        password = process_secrets.value("LANGHOST_ADMIN_PASSWORD", "")
        process_secrets.forget("LANGHOST_ADMIN_PASSWORD")  # used once: kept nowhere after this
        existing = User.objects.filter(email__iexact=email).first() if email else None
        if existing is not None:
            if existing.is_superuser:
                self.stdout.write(f"Admin account {email} already exists.")
            else:
                self.stdout.write(
                    self.style.WARNING(
                        f"User {email} already exists but is not a superuser; leaving it unchanged. "
                        "Promote it in the admin or pick another LANGHOST_ADMIN_EMAIL."
                    )
                )
            return
        if not (email and password):
            if not User.objects.filter(is_superuser=True).exists():
                self.stdout.write(
                    "No admin account yet: set LANGHOST_ADMIN_EMAIL and LANGHOST_ADMIN_PASSWORD, "
                    "or run `.venv/bin/python manage.py createsuperuser`."
                )
            return
        User.objects.create_superuser(email=email, password=password)
        self.stdout.write(self.style.SUCCESS(f"Created admin account {email}."))
