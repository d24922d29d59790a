import json

from django.db import migrations, models

import runners.models.providers
from runners.providers.secrets import EXTRA_HEADERS_LABEL, encrypt


def encrypt_extra_headers(apps, schema_editor):
    ModelProvider = apps.get_model("runners", "ModelProvider")
    for provider in ModelProvider.objects.exclude(extra_headers={}):
        provider.extra_headers_encrypted = encrypt(json.dumps(provider.extra_headers),
                                                   EXTRA_HEADERS_LABEL)
        provider.save(update_fields=["extra_headers_encrypted"])


class Migration(migrations.Migration):

    dependencies = [
        ("runners", "0007_runtime_workers"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelprovider",
            name="extra_headers_encrypted",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(encrypt_extra_headers, migrations.RunPython.noop, elidable=True),
        migrations.RemoveField(model_name="modelprovider", name="extra_headers"),
        migrations.AlterField(
            model_name="modelprovider",
            name="api_key_env",
            field=models.CharField(
                blank=True, default="", max_length=100,
                validators=[runners.models.providers.validate_key_variable],
                help_text="Take the API key from this environment variable instead of storing "
                          "it (its name must start with LANGHOST_PROVIDER_KEY_ENV_PREFIX, by "
                          "default LANGHOST_PROVIDER_)."),
        ),
    ]
