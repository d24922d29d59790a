"""The README's five-minute walkthrough, run as written (twice: a second run must work too)
against a real daphne serving the shipped example plugins."""

import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ROOT, start_daphne, stop_daphne
from tests.timing import scaled

pytestmark = pytest.mark.e2e

EMAIL, PASSWORD = "admin@example.com", "a long passphrase"
ECHO = "plugin:langhost/examples/echo"


def walkthrough() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Your first agent in five minutes"):]
    return re.search(r"```sh\n(API=.*?)```", section, re.S).group(1)


def wait_for_the_echo(url: str) -> None:
    with httpx.Client(base_url=url, timeout=scaled(10)) as http:
        token = http.post("/api/v1/auth/login", json={"email": EMAIL, "password": PASSWORD}
                          ).json()["access_token"]
        give_up = time.monotonic() + scaled(60)
        while ECHO not in [runner["id"] for runner in http.get(
                "/api/v1/runners?available=true",
                headers={"Authorization": f"Bearer {token}"}).json()["data"]]:
            assert time.monotonic() < give_up, "the example echo was never listed"
            time.sleep(0.2)


def test_the_walkthrough_runs_as_written_and_again(tmp_path: Path):
    url, process = start_daphne({
        "LANGHOST_DATA_DIR": str(tmp_path / "data"), "LANGHOST_ADMIN_EMAIL": EMAIL,
        "LANGHOST_ADMIN_PASSWORD": PASSWORD,
        "LANGHOST_PLUGINS_DIR": str(ROOT / "plugins")})
    script = walkthrough().replace("http://127.0.0.1:8000", url)
    try:
        wait_for_the_echo(url)  # as a reader of step 2 sees it listed
        runs = [subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script],
                               capture_output=True, text=True, timeout=scaled(120))
                for _ in range(2)]
    finally:
        stop_daphne(process)

    for run in runs:
        assert run.returncode == 0, run.stderr
        finished = [line for line in run.stdout.splitlines() if '"run.finished"' in line]
        assert len(finished) == 1 and '"status": "completed"' in finished[0].replace(
            '"status":"completed"', '"status": "completed"'), run.stdout
