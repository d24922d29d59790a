"""Plugins installed from a package upload (admin and API): a good one is loaded by the
runtime without restarting LangHost, a broken one is refused with its reason and leaves the
plugins dir as it was, and a deleted one takes its folder and runners with it."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from runners.execution.orchestrator import Orchestrator
from runners.models import PluginInstallation, RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.tests.test_plugin_failures import discovery_timeout, until

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "plugins"
ECHO = FIXTURES / "e2e__agent-runner-qa"
UPLOADED_RUNNER = "plugin:up/uploaded/default"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def package(folder: Path = ECHO, *, author="up", name="uploaded", top: str = "",
            manifest: str | None = None, extra: dict | None = None) -> bytes:
    """A zip of `folder` (under `top/` when given), its manifest renamed to `author`/`name`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(folder).as_posix()
                data = path.read_bytes()
                if relative == "manifest.yaml":
                    data = (manifest if manifest is not None else data.decode().replace(
                        "author: e2e", f"author: {author}").replace(
                        "name: agent-runner-qa", f"name: {name}")).encode()
                archive.writestr(f"{top}/{relative}" if top else relative, data)
        for relative, data in (extra or {}).items():
            archive.writestr(relative, data)
    return buffer.getvalue()


def upload(client, data: bytes, filename="up-uploaded-0.1.0.lbpkg"):
    return client.post("/api/v1/plugins", {"file": _file(data, filename)}, format="multipart")


def _file(data: bytes, filename: str):
    upload = io.BytesIO(data)
    upload.name = filename
    return upload


@pytest.fixture
def plugins_dir(tmp_path, settings):
    settings.LANGHOST_PLUGINS_DIR = tmp_path / "plugins"
    settings.LANGHOST_PLUGINS_DIR.mkdir()
    return settings.LANGHOST_PLUGINS_DIR


def folders_in(plugins_dir: Path) -> list[str]:
    return sorted(path.name for path in plugins_dir.iterdir() if not path.name.startswith("."))


@pytest.mark.slow("builds, uploads and installs a plugin package")
async def test_a_package_uploaded_in_the_admin_runs_without_restarting_langhost(
        own_gateway, admin_browser, settings):
    gateway = await own_gateway("e2e__agent-runner-qa")
    await gateway.discover(discovery_timeout())
    settings.LANGHOST_PLUGINS_DIR = gateway.plugins_dir

    response = await sync_to_async(admin_browser.post)(
        "/admin/runners/plugininstallation/upload/",
        {"file": _file(package(), "up-uploaded-0.1.0.lbpkg")})

    assert response.status_code == 302
    await until(lambda: RunnerDescriptor.objects.filter(pk=UPLOADED_RUNNER,
                                                        available=True).exists(), 20)
    installation = await PluginInstallation.objects.aget(author="up", name="uploaded")
    assert installation.enabled and installation.version == "0.1.0"
    outcome = await Orchestrator(gateway).run_to_end(
        AgentEventEnvelope(input={"text": "freshly installed"}),
        AgentBinding(binding_id="up", runner_id=UPLOADED_RUNNER))
    assert outcome["status"] == "completed"


@pytest.mark.parametrize(("data", "reason"), [
    (b"not a zip at all", "is not a zip or .lbpkg package"),
    (package(extra={"../evil.py": b"x = 1"}), "unsafe path"),
    (package(manifest="- broken\n"), "manifest.yaml must be a mapping"),
    (package(manifest="kind: Plugin\nmetadata: {author: up, name: nameless-entry}\n"),
     "execution.python.path"),
    (package(top="one", extra={"two/readme.txt": b"x"}), "no manifest.yaml at its root"),
    (package(author="../../escaped"), "may hold letters, digits"),
    (package(name="a/b"), "may hold letters, digits"),
    (package(manifest="kind: Plugin\nmetadata: {author: up, name: outside}\n"
                      "execution: {python: {path: /etc/hostname}}\n"),
     "a file inside the plugin's folder"),
])
def test_a_package_that_is_not_an_installable_plugin_is_refused_with_its_reason(
        superuser_client, plugins_dir, data, reason):
    refused = upload(superuser_client, data)

    assert refused.status_code == 400
    assert "file" in refused.json()["errors"]
    assert reason in json.dumps(refused.json())
    assert folders_in(plugins_dir) == [] and not PluginInstallation.objects.exists()
    assert list((plugins_dir / ".incoming").iterdir()) == []


def test_the_admin_shows_why_a_package_was_refused(admin_browser, plugins_dir):
    page = admin_browser.post("/admin/runners/plugininstallation/upload/",
                              {"file": _file(b"PK garbage", "broken.zip")}).content.decode()

    assert "broken.zip is not a zip or .lbpkg package" in page
    assert folders_in(plugins_dir) == []


def test_a_zip_of_the_folder_itself_installs_under_the_plugins_own_name(
        superuser_client, user_client, plugins_dir):
    created = upload(superuser_client, package(top="my-plugin"), "my-plugin.zip")

    assert created.status_code == 201, created.json()
    assert created.json()["plugin_id"] == "up/uploaded"
    assert folders_in(plugins_dir) == ["up__uploaded"]
    assert (plugins_dir / "up__uploaded" / "manifest.yaml").exists()
    again = upload(superuser_client, package())
    assert again.status_code == 400 and "installed already" in json.dumps(again.json())
    assert upload(user_client, package(name="other")).status_code == 403
    assert [plugin["plugin_id"] for plugin in user_client.get("/api/v1/plugins").json()[
        "data"]] == ["up/uploaded"]


def test_a_deleted_plugin_takes_its_folder_and_runners_with_it(superuser_client, plugins_dir):
    plugin = upload(superuser_client, package()).json()
    RunnerDescriptor.objects.create(id=UPLOADED_RUNNER, source=RunnerDescriptor.Source.PLUGIN,
                                    runner_name="default", plugin_author="up",
                                    plugin_name="uploaded", available=True)

    assert superuser_client.delete(f"/api/v1/plugins/{plugin['id']}").status_code == 204

    assert folders_in(plugins_dir) == []
    assert not PluginInstallation.objects.exists()
    assert not RunnerDescriptor.objects.get(pk=UPLOADED_RUNNER).available
