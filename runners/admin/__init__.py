"""The runners' admin: model pages (`catalogue`, `providers`), extra pages (`pages`) and the
dashboard."""

from runners.admin import catalogue, plugin_tools, plugins, providers, tools  # noqa: F401  (registers the ModelAdmins)
