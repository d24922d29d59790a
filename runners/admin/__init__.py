"""The runners' admin: model pages (`catalogue`, `providers`), extra pages (`pages`) and the
dashboard."""

from runners.admin import catalogue, providers  # noqa: F401  (registers the ModelAdmins)
