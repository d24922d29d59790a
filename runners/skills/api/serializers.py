from rest_framework import serializers

from runners.skills.models import Skill


class SkillSerializer(serializers.ModelSerializer):
    class Meta:
        model = Skill
        fields = ["name", "display_name", "description", "instructions", "revision", "files",
                  "created_at", "updated_at"]
        read_only_fields = fields


class SkillUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A zip of one or more skill packages (a directory "
                                           "with a SKILL.md and its files).")


class SkillPreviewSerializer(serializers.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField(allow_null=True)
    description = serializers.CharField(allow_null=True)
    instructions = serializers.CharField(allow_null=True)
