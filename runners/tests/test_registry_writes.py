"""Runner descriptors are written by `migrate` and by discovery (one transaction each, with the
plugins' statuses); looking a runner up only reads."""

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from runners.models import RunnerDescriptor
from runners.plugins import registry

pytestmark = [pytest.mark.django_db, pytest.mark.backend]


def writes(queries) -> list[str]:
    return [q["sql"] for q in queries
            if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]


def qa_runner(name: str) -> dict:
    return {"plugin_author": "e2e", "plugin_name": "agent-runner-qa", "runner_name": name,
            "manifest": {"label": {"en_US": name}}}


def test_the_builtin_runners_are_stored_by_migrate():
    assert RunnerDescriptor.objects.filter(pk="builtin:echo", available=True,
                                           source=RunnerDescriptor.Source.BUILTIN).exists()


def test_looking_up_a_builtin_runner_only_reads(monkeypatch):
    monkeypatch.setattr(registry, "_cache", {})

    async def never_rediscover():
        raise AssertionError("a built-in runner needs no discovery")

    with CaptureQueriesContext(connection) as queries:
        descriptor = async_to_sync(registry.get_descriptor)("builtin:echo", never_rediscover)

    assert descriptor.pk == "builtin:echo"
    assert queries.captured_queries and writes(queries) == []


def test_the_playground_only_reads(superuser):
    client = Client()
    client.force_login(superuser)

    with CaptureQueriesContext(connection) as queries:
        page = client.get("/admin/playground/")

    assert page.status_code == 200 and 'value="runner:builtin:echo"' in page.content.decode()
    assert writes(queries) == []


def test_a_discovery_that_fails_midway_stores_nothing():
    registry.store_discovered_sync([qa_runner("default")])
    broken = {"plugin_author": "e2e", "plugin_name": "agent-runner-qa"}  # no runner_name

    with pytest.raises(KeyError):
        registry.store_discovered_sync([qa_runner("slow"), broken])

    stored = dict(RunnerDescriptor.objects.filter(source=RunnerDescriptor.Source.PLUGIN)
                  .values_list("pk", "available"))
    assert stored == {"plugin:e2e/agent-runner-qa/default": True}


def test_plugin_statuses_of_one_discovery_are_stored_together_or_not_at_all(tmp_path,
                                                                             monkeypatch):
    from runners.hostapi.host import installation_for_sync
    from runners.models import PluginInstallation
    from runners.plugins.gateway import LocalGateway

    for name in ("first", "second"):
        installation_for_sync("writes", "e2e", name)
    gateway = LocalGateway(plugins_dir=tmp_path, runtime_dir=tmp_path, url="", instance="writes")
    saved = []

    def save_then_fail(installation, **kwargs):
        if saved:
            raise RuntimeError("database went away")
        saved.append(installation.name)
        real_save(installation, **kwargs)

    real_save = PluginInstallation.save
    monkeypatch.setattr(PluginInstallation, "save", save_then_fail)
    with pytest.raises(RuntimeError):
        gateway._record_plugin_status(listed=set())  # neither is listed: both become "failed"
    monkeypatch.undo()

    assert saved == ["first"]
    assert set(PluginInstallation.objects.values_list("status", flat=True)) == {""}
