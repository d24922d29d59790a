"""The whole API, fuzzed from its own OpenAPI schema by schemathesis against a live server
(`manage.py serve`, real daphne): no server error, no response outside the schema.

Every check runs but the two that compare request validation with the schema
(`positive_data_acceptance`, `negative_data_rejection`): the API refuses more than its schema
can say (a slug already taken, a foreign id that does not exist), and those refusals are 4xx
by design. The example budget and seed are fixed, so a run is repeatable and fits CI's time.
"""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import fresh_data_dir, start_serve, wait_until_serving
from tests.timing import scaled

pytestmark = pytest.mark.e2e

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# Enough to reach every operation's validation paths; more adds minutes to `make test`.
EXAMPLES_PER_OPERATION = 10
SEED = 1


def test_the_api_answers_every_generated_request_within_its_schema(tmp_path):
    port = free_port()
    server = start_serve(fresh_data_dir(tmp_path / "data"),
                         plugins_dir_with(tmp_path, "e2e__agent-runner-qa"), port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(30)) as http:
            token = wait_until_serving(http, server)
        run = subprocess.run([
            str(SCHEMATHESIS), "run", f"http://127.0.0.1:{port}/api/schema/",
            "--checks", "all",
            "--exclude-checks", "positive_data_acceptance,negative_data_rejection",
            "--max-examples", str(EXAMPLES_PER_OPERATION), "--seed", str(SEED),
            # One worker: hypothesis parses lambdas' source with `ast`, which CPython 3.11 does
            # not allow from two threads at once ("AST constructor recursion depth mismatch").
            "--phases", "examples,coverage,fuzzing", "--no-shrink", "--workers", "1",
            # A busy CI machine may drop a connection: retried, as a client would.
            "--request-timeout", str(scaled(60)), "--request-retries", "2",
            "-H", f"Authorization: Bearer {token}",
        ], cwd=tmp_path, capture_output=True, text=True, timeout=scaled(600), check=False)
    finally:
        server.terminate()
        server.wait(timeout=scaled(30))

    summary = run.stdout[run.stdout.find("SUMMARY"):] if "SUMMARY" in run.stdout else ""
    assert run.returncode == 0, (run.stdout[-6000:] + run.stderr[-2000:]
                                 + "\n" + summary[:3000])
