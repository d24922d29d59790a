"""The installation rows of the plugin folders LangHost hands to the runtime."""

from runners.hostapi.host import installation_for_sync
from runners.models import PluginInstallation
from runners.plugins import folders


def sync_installations_sync(found: list[folders.PluginFolder],
                            instance: str) -> list[PluginInstallation]:
    """One installation row per plugin folder (new folders start enabled)."""
    return [installation_for_sync(instance, folder.author, folder.name, folder.version)
            for folder in found]


def record_held_back_sync(errors: dict[str, str]) -> None:
    """Plugins kept from the runtime (a quarantined folder, requirements pip could not
    install) are `failed`, each with its own reason."""
    for installation in PluginInstallation.objects.all():
        if installation.plugin_id in errors:
            installation.status, installation.last_error = "failed", errors[installation.plugin_id]
            installation.save(update_fields=["status", "last_error", "updated_at"])
