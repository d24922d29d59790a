"""Webhook deliveries in the admin: each run's outcome, where it went, how often it was tried,
what the receiver answered."""

from django.contrib import admin

from runners.webhooks.models import WebhookDelivery


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["run_id", "url", "status", "attempts", "last_status_code", "delivered_at",
                    "created_at"]
    list_filter = ["status"]
    search_fields = ["run_id", "url"]
    readonly_fields = [field.name for field in WebhookDelivery._meta.fields]

    def has_add_permission(self, request):
        return False
