"""`manage.py run_agent` at the command line: the reply once, then the run id and its status."""

import re

from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import fresh_data_dir, langhost_env, manage

ECHO = "plugin:e2e/agent-runner-qa/default"


def test_run_agent_prints_the_reply_the_run_id_and_the_status_and_nothing_else(tmp_path):
    env = langhost_env(fresh_data_dir(tmp_path / "data"),
                       plugins_dir_with(tmp_path, "e2e__agent-runner-qa"))

    done = manage("run_agent", "--runner", ECHO, "hi", env=env)

    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"e2e echo: hi\nrun [0-9a-f-]{36} completed\n", done.stdout), done.stdout
    assert done.stderr == ""


def test_an_unknown_runner_prints_why_and_no_run_id(tmp_path):
    env = langhost_env(fresh_data_dir(tmp_path / "data"),
                       plugins_dir_with(tmp_path, "e2e__agent-runner-qa"))

    done = manage("run_agent", "--runner", "plugin:e2e/nobody/none", "hi", env=env)

    assert done.returncode == 1
    assert done.stdout == ""
    assert "nobody" in done.stderr and "run " not in done.stderr


def test_on_a_data_dir_never_migrated_it_makes_its_tables_quietly(tmp_path):
    env = langhost_env(tmp_path / "new-data", plugins_dir_with(tmp_path, "e2e__agent-runner-qa"))

    done = manage("run_agent", "--runner", ECHO, "first words", env=env, timeout=120)

    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"e2e echo: first words\nrun [0-9a-f-]{36} completed\n", done.stdout)
    assert done.stderr == ""
