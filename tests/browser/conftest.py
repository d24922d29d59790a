"""A real daphne with the QA fixture plugin, seeded data, and Debian's headless chromium.

Chromium and chromium-driver come from Debian (`.ci/run` installs them). In CI their absence
fails the browser tests; elsewhere it skips them with the command to install them.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    daphne_environ,
    start_daphne,
    stop_daphne,
)
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
FIXTURE_PLUGIN = ROOT / "tests" / "fixtures" / "plugins" / "e2e__agent-runner-qa"
EXAMPLES_PLUGIN = ROOT / "plugins" / "langhost__examples"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ECHO = "plugin:e2e/agent-runner-qa/default"
SLOW = "plugin:e2e/agent-runner-qa/slow"
CONFIRM = "plugin:e2e/agent-runner-qa/confirm"
COMMUNITY = "plugin:e2e/agent-runner-qa/community"
STREAMING_ECHO = "plugin:langhost/examples/echo"
OUTSIDER_EMAIL = "outsider@example.com"
OUTSIDER_PASSWORD = "Outsider-Passw0rd-77"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1400,1000",
]

SEED = """
from accounts.models import Project, User
from runners.models import AgentInstance, AgentType
import json
admin = User.objects.get(email={admin!r})
User.objects.create_user(email={outsider!r}, password={outsider_password!r})
project = Project.objects.create(name="Browser tests", slug="browser-tests", owner=admin)
echo = AgentType.objects.create(name="E2E echo", slug="e2e-echo", runner_id={echo!r})
agent = AgentInstance.objects.create(name="Echo agent", project=project, agent_type=echo)
asker = AgentType.objects.create(name="E2E confirm", slug="e2e-confirm", runner_id={confirm!r})
confirm = AgentInstance.objects.create(name="Confirm agent", project=project, agent_type=asker)
replier = AgentType.objects.create(name="E2E community", slug="e2e-community",
                                   runner_id={community!r})
community = AgentInstance.objects.create(name="Community agent", project=project,
                                         agent_type=replier)
print(json.dumps({{"project_id": str(project.pk), "agent_id": str(agent.pk),
                  "confirm_agent_id": str(confirm.pk),
                  "community_agent_id": str(community.pk)}}))
"""


def _require(path: Path) -> None:
    if path.exists():
        return
    message = f"{path} is missing: `make browser` installs Debian's chromium and its driver"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class Server:
    """The daphne under test, and what was seeded in it."""

    def __init__(self, url: str, seeded: dict):
        self.url = url
        self.ws_url = "ws" + url[len("http"):]
        self.project_id = seeded["project_id"]
        self.agent_id = seeded["agent_id"]
        self.confirm_agent_id = seeded["confirm_agent_id"]
        self.community_agent_id = seeded["community_agent_id"]
        self.http = httpx.Client(base_url=url, timeout=scaled(30.0))
        self.admin_token = self.login(ADMIN_EMAIL, ADMIN_PASSWORD)
        self.outsider_token = self.login(OUTSIDER_EMAIL, OUTSIDER_PASSWORD)

    def login(self, email: str, password: str) -> str:
        response = self.http.post("/api/v1/auth/login", json={"email": email, "password": password})
        assert response.status_code == 200, response.text
        return response.json()["access_token"]

    def api(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        return self.http.request(method, path, headers=headers, **kwargs)

    def wait_for_runners(self, *runner_ids: str, timeout: float = 30.0) -> None:
        """The runtime starts with the first request; its runners appear once it loaded them."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            response = self.api("GET", "/api/v1/runners", params={"available": "true",
                                                                  "page_size": 100})
            listed = {row["id"] for row in response.json().get("data", [])}
            if set(runner_ids) <= listed:
                return
            assert time.monotonic() < deadline, f"runners never appeared; have {sorted(listed)}"
            time.sleep(0.25)


@pytest.fixture(scope="session")
def browser_server(tmp_path_factory):
    _require(CHROMIUM)
    _require(CHROMEDRIVER)
    tmp = tmp_path_factory.mktemp("browser")
    plugins = tmp / "plugins"
    plugins.mkdir()
    for plugin in (FIXTURE_PLUGIN, EXAMPLES_PLUGIN):
        shutil.copytree(plugin, plugins / plugin.name,
                        ignore=shutil.ignore_patterns("__pycache__", "cancelled-*"))
    overrides = {"LANGHOST_DATA_DIR": str(tmp / "data"), "LANGHOST_PLUGINS_DIR": str(plugins)}
    url, process = start_daphne(overrides)
    try:
        seed = SEED.format(admin=ADMIN_EMAIL, outsider=OUTSIDER_EMAIL,
                           outsider_password=OUTSIDER_PASSWORD, echo=ECHO, confirm=CONFIRM,
                           community=COMMUNITY)
        result = subprocess.run([str(PYTHON), "manage.py", "shell", "-c", seed], cwd=ROOT,
                                env=daphne_environ(overrides), capture_output=True, text=True,
                                timeout=scaled(60))
        assert result.returncode == 0, result.stderr
        server = Server(url, json.loads(result.stdout.strip().splitlines()[-1]))
        server.env = daphne_environ(overrides)
        server.wait_for_runners(ECHO, SLOW, STREAMING_ECHO, CONFIRM, COMMUNITY)
        yield server
        server.http.close()
    finally:
        stop_daphne(process)


@pytest.fixture(scope="session")
def browser(browser_server):
    """Headless Debian chromium, signed in to the admin as the superuser."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="langhost-chromium-")
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP violations land there
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(scaled(15))
    try:
        driver.get(f"{browser_server.url}/admin/login/")
        driver.find_element(By.ID, "id_username").send_keys(ADMIN_EMAIL)
        driver.find_element(By.ID, "id_password").send_keys(ADMIN_PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        wait_until(lambda: driver.find_elements(By.ID, "langhost-dashboard"), what="the dashboard")
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def wait_until(condition, timeout: float = 15.0, interval: float = 0.05, what: str = "it"):
    """Poll `condition` until it returns something truthy; return that."""
    timeout = scaled(timeout)  # tests/timing.py
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def csp_violations(driver) -> list[str]:
    """The console's Content-Security-Policy refusals since the last call."""
    return [entry["message"] for entry in driver.get_log("browser")
            if "Content Security Policy" in entry["message"]]


@pytest.fixture(autouse=True)
def no_csp_violation(request):
    """Every browser test also proves its pages work under the Content-Security-Policy."""
    if "browser" not in request.fixturenames:
        yield
        return
    driver = request.getfixturevalue("browser")
    csp_violations(driver)  # what earlier tests left
    yield
    assert csp_violations(driver) == []
