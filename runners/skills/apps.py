from django.apps import AppConfig


class SkillsConfig(AppConfig):
    """Agent skills: packages of instructions and files (a SKILL.md), granted to agent types."""

    name = "runners.skills"
    label = "skills"
    default_auto_field = "django.db.models.BigAutoField"
