"""The runners' admin: model pages (`catalogue`), extra pages (`pages`) and the dashboard."""

from runners.admin import catalogue  # noqa: F401  (registers the ModelAdmins)
