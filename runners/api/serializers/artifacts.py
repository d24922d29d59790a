"""Conversation artifacts: an upload, and the metadata of stored files and their versions
(`ledger.services.artifacts.ArtifactInfo`)."""

from rest_framework import serializers


class ArtifactUploadSerializer(serializers.Serializer):
    """Multipart `file`, or JSON with `data` (base64) or `text`: exactly one of them."""

    name = serializers.CharField(max_length=255, required=False)
    mime_type = serializers.CharField(max_length=255, required=False)
    file = serializers.FileField(required=False)
    data = serializers.CharField(required=False, trim_whitespace=False)
    text = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)


class ArtifactSerializer(serializers.Serializer):
    """A stored file, described by its latest version."""

    name = serializers.CharField()
    latest_version = serializers.IntegerField(source="version")
    mime_type = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    created_at = serializers.DateTimeField()


class ArtifactVersionSerializer(serializers.Serializer):
    """One version of a stored file."""

    name = serializers.CharField()
    version = serializers.IntegerField()
    mime_type = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    created_at = serializers.DateTimeField()
    custom_metadata = serializers.DictField()
