from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path

from runners.admin.secret_fields import parse_secrets, secrets_field
from runners.models import LLMModel, ModelProvider
from runners.models.providers import HEADER_NAME
from runners.providers import importing, load_calls
from runners.providers.errors import ProviderError
from runners.providers.prices import prefill
from runners.providers.secrets import extra_header_names, set_api_key, set_extra_headers


class ModelProviderForm(forms.ModelForm):
    """The API key is write-only: the field never shows the stored key, and left blank it
    keeps it."""

    # Declared for its scheme: a bare host means https (Django 6's default, without warnings).
    base_url = forms.URLField(
        required=False, max_length=500, assume_scheme="https",
        help_text=ModelProvider._meta.get_field("base_url").help_text)
    api_key = forms.CharField(
        label="API key", required=False, strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted, never shown again. Leave blank to keep the current key.")
    remove_api_key = forms.BooleanField(label="Remove the stored API key", required=False)
    extra_headers = secrets_field("Extra headers", "Name: value")
    clear_extra_headers = forms.BooleanField(label="Remove all extra headers", required=False)

    class Meta:
        model = ModelProvider
        fields = ["name", "kind", "base_url", "api_key_env", "timeout"]

    def clean_extra_headers(self):
        return parse_secrets(self.cleaned_data["extra_headers"], ":", HEADER_NAME, "header")

    def save(self, commit=True):
        provider = super().save(commit=False)
        if self.cleaned_data.get("remove_api_key"):
            set_api_key(provider, "")
        elif self.cleaned_data.get("api_key"):
            set_api_key(provider, self.cleaned_data["api_key"])
        if self.cleaned_data.get("clear_extra_headers"):
            set_extra_headers(provider, {})
        elif self.cleaned_data.get("extra_headers"):
            set_extra_headers(provider, self.cleaned_data["extra_headers"])
        if commit:
            provider.save()
        return provider


@admin.register(ModelProvider)
class ModelProviderAdmin(admin.ModelAdmin):
    form = ModelProviderForm
    list_display = ["name", "kind", "base_url", "key_source", "timeout", "updated_at"]
    list_filter = ["kind"]
    search_fields = ["name", "base_url"]
    readonly_fields = ["key_source", "header_names", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "kind", "base_url", "timeout"]}),
        ("API key", {"fields": ["key_source", "api_key", "remove_api_key", "api_key_env"]}),
        ("Advanced", {"fields": ["header_names", "extra_headers", "clear_extra_headers",
                                 "created_at", "updated_at"]}),
    ]

    change_form_template = "admin/runners/modelprovider/change_form.html"

    def get_urls(self):
        return [path("<uuid:provider_pk>/upstream-models/",
                     self.admin_site.admin_view(self.upstream_models_view),
                     name="runners_modelprovider_upstream"), *super().get_urls()]

    def upstream_models_view(self, request, provider_pk):
        """The provider's own models, listed from its API, to import as LLM models."""
        if not request.user.is_superuser:
            raise PermissionDenied
        provider = get_object_or_404(ModelProvider, pk=provider_pk)
        try:
            listed = async_to_sync(load_calls().upstream_models)(provider)
        except ProviderError as exc:
            messages.error(request, f"{provider.name} did not list its models: {exc}")
            return redirect("admin:runners_modelprovider_change", provider.pk)
        if request.method == "POST":
            imported = importing.import_models(provider, listed, request.POST.getlist("ids"))
            messages.success(request, f"Imported {len(imported['created'])} model(s): "
                                      f"{', '.join(imported['created']) or 'none'}.")
            return redirect("admin:runners_llmmodel_changelist")
        return TemplateResponse(request, "admin/runners/modelprovider/upstream_models.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": f"Models of {provider.name}", "provider": provider,
            "listed": importing.with_imported(provider, listed)})

    @admin.display(description="Extra headers set")
    def header_names(self, obj):
        return ", ".join(extra_header_names(obj)) or "none"

    @admin.display(description="API key")
    def key_source(self, obj):
        if obj.api_key_encrypted:
            return "stored (encrypted)"
        if obj.api_key_env:
            return f"from ${obj.api_key_env}"
        return "none"


class LLMModelForm(forms.ModelForm):
    context_window = forms.IntegerField(
        required=False, min_value=1,
        help_text="Tokens the model reads at most. Left blank on a new model: what genai-prices "
                  "knows of the upstream model, else 8192.")

    class Meta:
        model = LLMModel
        fields = ["name", "provider", "upstream_model", "model_type", "abilities",
                  "context_window", "is_active", "input_price_per_mtok", "output_price_per_mtok",
                  "cached_price_per_mtok"]

    def clean_context_window(self):
        window = self.cleaned_data["context_window"]
        if window is None and not self.instance._state.adding:
            raise forms.ValidationError("Give the model's context window.")
        return window


@admin.register(LLMModel)
class LLMModelAdmin(admin.ModelAdmin):
    form = LLMModelForm
    list_display = ["name", "provider", "upstream_model", "model_type", "input_price_per_mtok",
                    "output_price_per_mtok", "is_active"]
    list_filter = ["is_active", "model_type", "provider"]
    search_fields = ["name", "upstream_model"]
    autocomplete_fields = ["provider"]
    readonly_fields = ["id", "created_at", "updated_at"]
    actions = ["test_connection"]
    fieldsets = [
        (None, {"fields": ["id", "name", "provider", "upstream_model", "model_type", "abilities",
                           "context_window", "is_active"]}),
        ("Prices per million tokens", {
            "fields": ["input_price_per_mtok", "output_price_per_mtok", "cached_price_per_mtok"],
            "description": "Left at zero on a new model, they are filled in from genai-prices "
                           "when it knows the upstream model."}),
        ("Dates", {"fields": ["created_at", "updated_at"]}),
    ]

    def save_model(self, request, obj, form, change):
        if not change:
            window_left = form.cleaned_data.get("context_window") is None
            if window_left:
                obj.context_window = LLMModel._meta.get_field("context_window").default
            if filled := prefill(obj, window=window_left):
                self.message_user(request, f"{' and '.join(filled).capitalize()} of "
                                           f"{obj.upstream_model} filled in from genai-prices.",
                                  messages.INFO)
        super().save_model(request, obj, form, change)

    @admin.action(description="Test connection (one-token call)")
    def test_connection(self, request, queryset):

        for model in queryset.select_related("provider"):
            result = async_to_sync(load_calls().probe)(model)
            if result["ok"]:
                self.message_user(request, f"Test of {model.name}: answered in "
                                           f"{result['latency_ms']} ms.", messages.SUCCESS)
            else:
                self.message_user(request, f"Test of {model.name}: {result['error']}",
                                  messages.ERROR)
