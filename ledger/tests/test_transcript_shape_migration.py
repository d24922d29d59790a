"""Migration 0006: users' transcript lines written before it read in LangBot's shape after."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

BEFORE = [("ledger", "0005_model_calls")]
AFTER = [("ledger", "0006_transcript_content_in_langbots_shape")]


def migrate(targets):
    """To `targets` through the migrations one by one: 0006 lives on only inside the squash
    that replaced them, for data dirs part-way through them."""
    executor = MigrationExecutor(connection)
    executor.loader = MigrationLoader(connection, replace_migrations=False)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture(autouse=True)
def back_to_the_latest():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_users_old_line_gets_content_and_an_assistants_line_is_left_alone():
    apps = migrate(BEFORE)
    Transcript = apps.get_model("ledger", "Transcript")
    parts = [{"type": "text", "text": "hello"}]
    user = Transcript.objects.create(conversation_id="c", role="user", content="hello",
                                     content_json={"role": "user", "contents": parts})
    assistant = Transcript.objects.create(
        conversation_id="c", role="assistant", content="hi",
        content_json={"role": "assistant", "content": "hi"})

    Transcript = migrate(AFTER).get_model("ledger", "Transcript")

    assert Transcript.objects.get(pk=user.pk).content_json == {"role": "user", "content": parts}
    assert Transcript.objects.get(pk=assistant.pk).content_json == {"role": "assistant",
                                                                     "content": "hi"}
    Transcript = migrate(BEFORE).get_model("ledger", "Transcript")
    assert Transcript.objects.get(pk=user.pk).content_json == {"role": "user", "contents": parts}
