"""`manage.py run_agent` at the command line: the reply once, then the run id and its status."""

import re

import pytest

from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import fresh_data_dir, langhost_env, ledger_rows, manage

pytestmark = pytest.mark.processes

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
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_on_a_data_dir_never_migrated_it_makes_its_tables_quietly(tmp_path):
    env = langhost_env(tmp_path / "new-data", plugins_dir_with(tmp_path, "e2e__agent-runner-qa"))

    done = manage("run_agent", "--runner", ECHO, "first words", env=env, timeout=120)

    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"e2e echo: first words\nrun [0-9a-f-]{36} completed\n", done.stdout)
    assert done.stderr == ""


SEED = """
from accounts.models import Project, User
from ledger.services import conversations
from runners.models import AgentInstance, AgentType
admin = User.objects.create_superuser(email="ops@example.com", password="Cli-Passw0rd-long")
project = Project.objects.create(name="Ops", slug="ops", owner=admin)
kind = AgentType.objects.create(name="Echoer", slug="echoer", runner_id="{runner}")
agent = AgentInstance.objects.create(name="Echo Ada", project=project, agent_type=kind)
conversations.create(project_id=str(project.pk), agent_id=str(agent.pk),
                     user_id=str(admin.pk), client_id="my-talk")
"""

# The lines of the conversation its owner knows as "my-talk", read from the database itself.
COUNT = ("SELECT count(*) FROM transcript JOIN conversation "
         "ON transcript.conversation_id = conversation.conversation_id "
         "WHERE conversation.client_id = 'my-talk'")


@pytest.mark.slow("four `manage.py` commands, three of them starting the runtime")
def test_an_agent_is_named_by_its_name_and_a_conversation_by_the_id_its_owner_knows(tmp_path):
    data_dir = fresh_data_dir(tmp_path / "data")
    env = langhost_env(data_dir,
                       plugins_dir_with(tmp_path, "e2e__agent-runner-qa"),
                       LANGHOST_ADMIN_EMAIL="ops@example.com")
    assert manage("shell", "-c", SEED.replace("{runner}", ECHO), env=env).returncode == 0

    first = manage("run_agent", "--agent", "Echo Ada", "hello", env=env)
    again = manage("run_agent", "--agent", "Echo Ada", "--conversation", "my-talk", "once more",
                   env=env)

    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("e2e echo: hello\n")
    assert again.returncode == 0, again.stderr
    assert ledger_rows(data_dir, COUNT) == [(2,)]
    unknown = manage("run_agent", "--agent", "Nobody", "hi", env=env)
    assert unknown.returncode == 1 and "no agent 'Nobody'" in unknown.stderr


def test_a_command_on_a_data_dir_never_migrated_says_to_migrate_first(tmp_path):
    env = langhost_env(tmp_path / "new-data", tmp_path / "plugins")

    done = manage("rebuild_rollups", env=env)

    assert done.returncode == 1
    assert "manage.py migrate" in done.stderr and "Traceback" not in done.stderr
