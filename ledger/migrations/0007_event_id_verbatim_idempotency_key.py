"""Event ids as their senders gave them: the key that makes a replay run nothing moves to a
column of its own (`event_log.idempotency_key`), and ids stored as `<id>~<16 hex digits>`
(the key) get their sender's id back in `event_log`, `agent_run`, `transcript` and
`steering_item`."""

import re

from django.db import migrations, models

SCOPED = re.compile(r"^(?P<id>.+)~[0-9a-f]{16}$")
BATCH = 500


def split_keys(apps, schema_editor):
    EventLog = apps.get_model("ledger", "EventLog")
    for row in EventLog.objects.filter(idempotency_key="").iterator(chunk_size=BATCH):
        EventLog.objects.filter(pk=row.pk).update(idempotency_key=row.event_id)
    for name in ("EventLog", "AgentRun", "Transcript", "SteeringItem"):
        model = apps.get_model("ledger", name)
        for pk, event_id in (model.objects.filter(event_id__regex=r"~[0-9a-f]{16}$")
                             .values_list("pk", "event_id").iterator(chunk_size=BATCH)):
            model.objects.filter(pk=pk).update(event_id=SCOPED.match(event_id)["id"])


def join_keys(apps, schema_editor):
    EventLog = apps.get_model("ledger", "EventLog")
    AgentRun = apps.get_model("ledger", "AgentRun")
    for row in EventLog.objects.exclude(idempotency_key=models.F("event_id")).iterator():
        EventLog.objects.filter(pk=row.pk).update(event_id=row.idempotency_key)
        if row.run_id:
            AgentRun.objects.filter(run_id=row.run_id).update(event_id=row.idempotency_key)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0006_transcript_content_in_langbots_shape")]

    operations = [
        migrations.AddField(
            model_name="eventlog", name="idempotency_key",
            field=models.CharField(default="", max_length=255), preserve_default=False),
        migrations.AlterField(
            model_name="eventlog", name="event_id",
            field=models.CharField(db_index=True, max_length=255)),
        migrations.RunPython(split_keys, join_keys, elidable=True),
        migrations.AlterField(
            model_name="eventlog", name="idempotency_key",
            field=models.CharField(max_length=255, unique=True)),
    ]
