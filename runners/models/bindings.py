"""Bindings: which runner answers for a scope, with which config and policies."""

from django.db import models


def default_state_policy():
    return {"enable_state": True, "state_scopes": ["conversation", "actor"]}


def default_delivery_policy():
    return {"enable_streaming": True, "enable_reply": True}


def default_resource_policy():
    return {"allow_plugin_storage": True, "allow_workspace_storage": False}


class Binding(models.Model):
    """Which runner answers for a scope. `binding_id` is part of every state key: keep it stable."""

    class ScopeType(models.TextChoices):
        GLOBAL = "global"
        PROJECT = "project"
        AGENT = "agent"
        CONVERSATION = "conversation"

    binding_id = models.CharField(max_length=255, unique=True)
    scope_type = models.CharField(max_length=16, choices=ScopeType.choices, default=ScopeType.GLOBAL)
    scope_id = models.CharField(max_length=255, blank=True, default="")
    runner_id = models.CharField(max_length=255)
    runner_config = models.JSONField(default=dict, blank=True)
    state_policy = models.JSONField(default=default_state_policy, blank=True)
    delivery_policy = models.JSONField(default=default_delivery_policy, blank=True)
    resource_policy = models.JSONField(default=default_resource_policy, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["scope_type", "scope_id", "binding_id"]

    def __str__(self):
        return self.binding_id
