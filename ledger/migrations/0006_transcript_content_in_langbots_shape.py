"""A user's transcript lines in LangBot's shape: `{"role": "user", "content": [...]}`, as
runners reading `history_page` expect (they were written with `contents`)."""

from django.db import migrations

BATCH = 500


def rename_contents(apps, schema_editor):
    Transcript = apps.get_model("ledger", "Transcript")
    rows = Transcript.objects.filter(content_json__has_key="contents").only("id", "content_json")
    while batch := list(rows[:BATCH]):
        for row in batch:
            message = dict(row.content_json)
            message.setdefault("content", message.pop("contents"))
            message.pop("contents", None)
            row.content_json = message
        Transcript.objects.bulk_update(batch, ["content_json"])


def restore_contents(apps, schema_editor):
    Transcript = apps.get_model("ledger", "Transcript")
    rows = Transcript.objects.filter(role="user", content_json__has_key="content")
    while batch := list(rows.exclude(content_json__has_key="contents")[:BATCH]):
        for row in batch:
            message = dict(row.content_json)
            message["contents"] = message.pop("content")
            row.content_json = message
        Transcript.objects.bulk_update(batch, ["content_json"])


class Migration(migrations.Migration):
    dependencies = [("ledger", "0005_model_calls")]

    operations = [migrations.RunPython(rename_contents, restore_contents, elidable=True)]
