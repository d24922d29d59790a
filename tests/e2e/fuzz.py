"""The API, fuzzed from its own OpenAPI schema by schemathesis against a live server
(`manage.py serve`, real daphne): every operation reached signed in, no server error, no
response outside the schema. Two test files fuzz a share each (a project's operations, the
rest), so the two halves run on two workers at once; each checks it reached every operation of
its share, and the shares make the whole schema.

Every generated request carries a valid token (`schemathesis_hooks.py`: `auth/logout`, which
revokes the token it is sent with, signs in afresh each time), and a 401 outside the
operations that take credentials fails the run. Every check runs but the two that compare
request validation with the schema (`positive_data_acceptance`, `negative_data_rejection`): the
API refuses more than its schema can say (a slug already taken, a foreign id that does not
exist), and those refusals are 4xx by design. A response past two minutes (scaled) fails the
run as a hang; speed itself is measured in `bench/`, not on a machine the rest of the suite
keeps busy. The example budget and seed are fixed, so a run
is repeatable and fits CI's time.
"""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import ADMIN, fresh_data_dir, start_serve, wait_until_serving
from tests.timing import scaled

# Some 4,000 requests a share: past pytest-timeout's 300 s on a busy machine.
MARKS = [pytest.mark.e2e, pytest.mark.slow("fuzzes half the operations of the API", seconds=150),
         pytest.mark.timeout(900)]
# The paths of a project's operations: one share; every other path, the other.
PROJECT_PATHS = "/api/v1/projects/"
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
CONFIG = Path(__file__).with_name("schemathesis.toml")
# Enough to reach every operation's validation paths; more adds minutes to `make test`.
EXAMPLES_PER_OPERATION = 5
SEED = 1
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def fuzz(tmp_path: Path, projects: bool) -> None:
    """Fuzz a project's operations (`projects`) or every other one; fails on any failed check,
    or if the run did not reach every operation of its share."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    server = start_serve(fresh_data_dir(tmp_path / "data"),
                         plugins_dir_with(tmp_path, "e2e__agent-runner-qa"), port)
    try:
        with httpx.Client(base_url=base_url, timeout=scaled(30)) as http:
            token = wait_until_serving(http, server)
            schema = http.get("/api/schema/", params={"format": "json"}).json()
        run = subprocess.run([
            str(SCHEMATHESIS), "--config-file", str(CONFIG), "run", f"{base_url}/api/schema/",
            "--checks", "all",
            "--exclude-checks", "positive_data_acceptance,negative_data_rejection",
            "--max-response-time", str(scaled(120)),
            "--max-examples", str(EXAMPLES_PER_OPERATION), "--seed", str(SEED),
            "--include-path-regex" if projects else "--exclude-path-regex", PROJECT_PATHS,
            # One worker: hypothesis parses lambdas' source with `ast`, which CPython 3.11 does
            # not allow from two threads at once ("AST constructor recursion depth mismatch").
            "--phases", "examples,coverage,fuzzing", "--no-shrink", "--workers", "1",
            # A busy CI machine may drop a connection: retried, as a client would.
            "--request-timeout", str(scaled(60)), "--request-retries", "2",
            "--report", "junit", "--report-junit-path", str(tmp_path / "junit.xml"),
        ], cwd=tmp_path, capture_output=True, text=True, timeout=scaled(600), check=False,
            env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), "FUZZ_BASE_URL": base_url,
                 "FUZZ_TOKEN": token, "FUZZ_EMAIL": ADMIN["email"],
                 "FUZZ_PASSWORD": ADMIN["password"]})
    finally:
        server.terminate()
        server.wait(timeout=scaled(30))

    assert run.returncode == 0, failures(run.stdout) + run.stderr[-2000:]
    operations = {f"{method.upper()} {path}" for path, item in schema["paths"].items()
                  for method in item
                  if method in METHODS and bool(re.search(PROJECT_PATHS, path)) == projects}
    fuzzed = {case.get("name") for case in ElementTree.parse(tmp_path / "junit.xml").iter(
        "testcase")}
    assert operations == fuzzed, sorted(operations ^ fuzzed)


def failures(output: str) -> str:
    """Schemathesis's failures and summary, each line cut short (a generated body can be huge)."""
    shown = output[output.find("FAILURES"):output.find("WARNINGS")] + output[output.find("SUMMARY"):]
    return "\n".join(line[:300] for line in shown.splitlines())[:12000]
