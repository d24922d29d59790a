import shutil
from pathlib import Path

import pytest_asyncio

from runners.gateway import LocalGateway
from tests.conftest import *  # noqa: F403  (people, clients, factories)

FIXTURE_PLUGINS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "plugins"


def plugins_dir_with(tmp: Path, *names: str) -> Path:
    """A plugins dir holding copies of the named fixture plugins."""
    plugins = tmp / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(FIXTURE_PLUGINS / name, plugins / name)
    return plugins


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def qa_gateway(tmp_path_factory):
    """One real runtime (stdio) with the QA fixture plugin, shared by a session's tests."""
    tmp = tmp_path_factory.mktemp("qa-runtime")
    gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp, "e2e__agent-runner-qa"),
                           runtime_dir=tmp / "runtime", url="", instance="langhost-tests")
    yield gateway
    await gateway.stop()
