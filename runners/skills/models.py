"""An installed skill: its package (a `SKILL.md` with name, description and instructions, and
its files) lives in the SDK's skill store under the data dir; the row is what the admin, the
API and the grants see of it."""

from django.db import models


class Skill(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    instructions = models.TextField(blank=True, help_text="What SKILL.md tells the agent.")
    revision = models.CharField(max_length=100, help_text="The package's content digest.")
    files = models.JSONField(default=list, blank=True,
                             help_text="The package's files (paths), SKILL.md among them.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.display_name or self.name
