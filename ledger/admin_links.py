"""Names and links for the ids the ledger keeps as strings (agents, projects, users).

The ledger names what it records by id and imports no runner code: these look the names up
through the app registry, by model label, and keep them for a short while (a list page shows
the same few agents and projects on every row).
"""

import time
import uuid

from django.apps import apps
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

NAME_SECONDS = 30.0
# (what, app label, model, field that names it, admin url name)
KINDS = {
    "agent": ("runners", "AgentInstance", "name", "admin:runners_agentinstance_change"),
    "project": ("accounts", "Project", "name", "admin:accounts_project_change"),
    "user": ("accounts", "User", "email", "admin:accounts_user_change"),
}
_names: dict[tuple[str, str], tuple[float, str | None]] = {}


def _pk(kind: str, value: str):
    if kind == "user":
        return int(value) if value.isdigit() else None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def name_of(kind: str, value: str) -> str | None:
    """The name of the agent, project or user with this id; None if there is none."""
    cached = _names.get((kind, value))
    if cached and cached[0] > time.monotonic():
        return cached[1]
    app_label, model_name, field, _ = KINDS[kind]
    pk = _pk(kind, value or "")
    model = apps.get_model(app_label, model_name)
    name = None if pk is None else model.objects.filter(pk=pk).values_list(field, flat=True).first()
    _names[(kind, value)] = (time.monotonic() + NAME_SECONDS, name)
    return name


def link(kind: str, value: str):
    """The name of what `value` names, linked to its admin page; the bare id if it is gone."""
    if not value:
        return "—"
    name = name_of(kind, value)
    if name is None:
        return value
    try:
        url = reverse(KINDS[kind][3], args=[_pk(kind, value)])
    except NoReverseMatch:
        return name
    return format_html('<a href="{}" title="{}">{}</a>', url, value, name)


def status_badge(status: str):
    return format_html('<span class="run-status status-{}">{}</span>', status, status)


def run_link(run_id: str):
    return format_html('<a href="{}">{}</a>', reverse("admin-run-detail", args=[run_id]), run_id)
