"""Fixtures for tests against the real SDK runtime process (pure asyncio, no Django).

``link`` gives each test its own runtime (for tests that kill or stop it);
``shared_link`` is one runtime per module, for tests that only run runners.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from memory_host import MemoryHost
from runtime_helpers import make_runtime_dir, wait_for_runner

from runners.runtime import RuntimeLink
from tests.timing import scaled


async def _ready_link(host: MemoryHost, runtime_dir: Path) -> RuntimeLink:
    link = RuntimeLink(host, "pytest", runtime_dir=runtime_dir)
    await link.start()
    try:
        await link.wait_ready(scaled(20))
        await wait_for_runner(link, "plugin:e2e/agent-runner-qa/default")
    except BaseException:
        await link.stop()
        raise
    return link


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Path:
    """A runtime cwd with the QA plugin in data/plugins."""
    return make_runtime_dir(tmp_path, "e2e__agent-runner-qa")


@pytest.fixture
def host() -> MemoryHost:
    return MemoryHost()


@pytest_asyncio.fixture
async def link(runtime_dir: Path, host: MemoryHost):
    """A ready stdio link whose QA runners are listed."""
    link = await _ready_link(host, runtime_dir)
    yield link
    await link.stop()


@pytest.fixture(scope="module")
def shared_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_runtime_dir(tmp_path_factory.mktemp("runtime"), "e2e__agent-runner-qa")


@pytest.fixture(scope="module")
def shared_host() -> MemoryHost:
    return MemoryHost()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_link(shared_runtime_dir: Path, shared_host: MemoryHost):
    """One ready stdio link per module; tests using it must not stop or kill it."""
    link = await _ready_link(shared_host, shared_runtime_dir)
    yield link
    await link.stop()
