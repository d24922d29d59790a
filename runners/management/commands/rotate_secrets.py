from django.core.management.base import CommandError
from django.db import transaction

from langhost.base.commands import DatabaseCommand
from runners.catalogue import runner_config
from runners.knowledge import engines
from runners.providers.secrets import rotate_api_keys_sync
from runners.tools.mcp_servers import rotate_secrets_sync


class Command(DatabaseCommand):
    help = ("Re-encrypt every stored secret (provider API keys, MCP servers' env and headers, "
            "agent types' secret runner config, knowledge engines' secret settings) "
            "under the current DJANGO_SECRET_KEY. Run it after moving the old key to "
            "DJANGO_SECRET_KEY_FALLBACKS; once it succeeds the fallback may be removed.")

    def handle(self, *args, **options):
        with transaction.atomic():
            keys, unreadable_keys = rotate_api_keys_sync()
            servers, unreadable_servers = rotate_secrets_sync()
            types, unreadable_types = runner_config.rotate_secrets_sync()
            bases, unreadable_bases = runner_config.rotate_secrets_sync(engines.SEALED_FIELDS)
            types, unreadable_types = types + bases, unreadable_types + unreadable_bases
        self.stdout.write(f"{keys} provider key(s), {servers} MCP server(s) and {types} runner, "
                          "plugin or knowledge engine config(s) re-encrypted under the current secret key.")
        if unreadable_keys or unreadable_servers or unreadable_types:
            names = ", ".join([*(f"provider {n}" for n in unreadable_keys),
                               *(f"MCP server {n}" for n in unreadable_servers),
                               *(f"config of {n}" for n in unreadable_types)])
            raise CommandError(f"Unreadable under every key in use (set them again): {names}")
