from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from runners.providers.secrets import rotate_api_keys_sync
from runners.tools.mcp_servers import rotate_secrets_sync


class Command(BaseCommand):
    help = ("Re-encrypt every stored secret (provider API keys, MCP servers' env and headers) "
            "under the current DJANGO_SECRET_KEY. Run it after moving the old key to "
            "DJANGO_SECRET_KEY_FALLBACKS; once it succeeds the fallback may be removed.")

    def handle(self, *args, **options):
        with transaction.atomic():
            keys, unreadable_keys = rotate_api_keys_sync()
            servers, unreadable_servers = rotate_secrets_sync()
        self.stdout.write(f"{keys} provider key(s) and {servers} MCP server(s) re-encrypted "
                          "under the current secret key.")
        if unreadable_keys or unreadable_servers:
            names = ", ".join([*(f"provider {n}" for n in unreadable_keys),
                               *(f"MCP server {n}" for n in unreadable_servers)])
            raise CommandError(f"Unreadable under every key in use (set them again): {names}")
