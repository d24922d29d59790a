from django.db import migrations, models


def copy_client_ids(apps, schema_editor):
    """Existing conversations keep the id their owner knows them by."""
    Conversation = apps.get_model("ledger", "Conversation")
    Conversation.objects.update(client_id=models.F("conversation_id"))


def copy_run_actors(apps, schema_editor):
    """Existing runs get the actor their event log row recorded."""
    AgentRun = apps.get_model("ledger", "AgentRun")
    EventLog = apps.get_model("ledger", "EventLog")
    actors = EventLog.objects.filter(event_id=models.OuterRef("event_id"))
    AgentRun.objects.update(
        actor_type=models.Subquery(actors.values("actor_type")[:1]),
        actor_id=models.Subquery(actors.values("actor_id")[:1]),
    )


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0003_run_event_run_index_in_unique"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="client_id",
            field=models.CharField(default="", max_length=128),
            preserve_default=False,
        ),
        migrations.RunPython(copy_client_ids, migrations.RunPython.noop, elidable=True),
        migrations.RemoveIndex(
            model_name="conversation",
            name="conversation_agent_user",
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                fields=("agent_id", "user_id", "client_id"),
                name="conversation_client_id_per_owner",
            ),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="actor_type",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="actor_id",
            field=models.CharField(blank=True, db_index=True, default="", max_length=255),
        ),
        migrations.RunPython(copy_run_actors, migrations.RunPython.noop, elidable=True),
    ]
