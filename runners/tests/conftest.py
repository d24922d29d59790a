import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from django.test import Client

from runners.plugins.gateway import LocalGateway
from runners.runtime import sandbox
from runners.runtime.host_process import host_process
from runners.runtime.loop_bound import LoopBoundGateway
from tests.timing import scaled

FIXTURE_PLUGINS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "plugins"
EXAMPLE_PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def plugins_dir_with(tmp: Path, *names: str) -> Path:
    """A plugins dir holding copies of the named fixture plugins (or example plugins, those
    `make run` serves)."""
    plugins = tmp / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = FIXTURE_PLUGINS / name
        shutil.copytree(source if source.exists() else EXAMPLE_PLUGINS / name, plugins / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return plugins


def serve_as_process_gateway(monkeypatch, gateway: LocalGateway) -> None:
    """Until the test ends, `get_gateway()` is `gateway`, bound to the running loop."""
    monkeypatch.setattr(host_process(), "gateway_binding",
                        LoopBoundGateway(gateway, asyncio.get_running_loop()))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def qa_gateway(tmp_path_factory):
    """One real runtime (stdio) with the QA fixture plugin, shared by a session's tests."""
    tmp = tmp_path_factory.mktemp("qa-runtime")
    gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp, "e2e__agent-runner-qa"),
                           runtime_dir=tmp / "runtime", url="", instance="langhost-tests")
    yield gateway
    await gateway.stop()


TOOLS_PLUGINS = ("e2e__tools-demo", "e2e__needs-pyjokes", "e2e__needs-missing-package",
                 "e2e__pins-old-sdk")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tools_gateway(tmp_path_factory):
    """One real runtime (stdio) with the tool fixture plugins and the three with requirements
    (one installable, one not, one pinning another SDK), shared by a session's tests; started
    by the first discovery."""
    tmp = tmp_path_factory.mktemp("tools-runtime")
    gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp, *TOOLS_PLUGINS),
                           runtime_dir=tmp / "runtime", url="", instance="langhost-tools")
    yield gateway
    await gateway.stop()


@pytest_asyncio.fixture
async def own_gateway(tmp_path, monkeypatch):
    """`own_gateway(*plugin_folders)`: a started gateway that `get_gateway()` returns, so sync
    views (admin, API) called through `sync_to_async` reach it as under daphne."""
    made = []

    async def make(*plugins: str) -> LocalGateway:
        gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp_path, *plugins),
                               runtime_dir=tmp_path / "runtime", url="", instance="own-gateway")
        serve_as_process_gateway(monkeypatch, gateway)
        made.append(gateway)
        await gateway.start()
        return gateway

    yield make
    for gateway in made:
        await gateway.stop()


@pytest.fixture(params=["bwrap", "namespaces"])
def engine(request, settings):
    """Each engine that confines plugins and the box: bubblewrap (`make test` installs it), and
    Python with the kernel alone (what a machine without bubblewrap gets)."""
    problem, nests = sandbox._probe(request.param)
    if problem or not nests:
        pytest.skip(f"{request.param} cannot confine each plugin here: {problem}")
    settings.LANGHOST_PLUGIN_SANDBOX = request.param
    return request.param


@pytest_asyncio.fixture
async def llm_plugin_gateway(own_gateway):
    """An own gateway whose runtime has listed the LLM fixture plugin's runners (model caller,
    LangBot-shaped local agent, knowledge reader)."""
    gateway = await own_gateway("e2e__agent-runner-llm")
    await gateway.discover(scaled(30))
    return gateway


@pytest.fixture
def admin_browser(superuser):
    """A Django test client signed in to the admin as a superuser."""
    client = Client()
    client.force_login(superuser)
    return client
