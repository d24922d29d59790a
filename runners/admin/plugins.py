"""Plugins in the admin: their installations (enable, disable, settings, delete) and an upload
page that installs a plugin package (`runners.plugins.install`)."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from runners.admin.plugin_pages import PluginPagesAdmin
from runners.admin.secret_fields import show_config_without_secrets
from runners.catalogue import runner_config
from runners.models import PluginInstallation
from runners.plugins import folders, install


class UploadForm(forms.Form):
    file = forms.FileField(help_text="A LangBot plugin package (.lbpkg) or a zip of the plugin "
                                     "folder, its manifest.yaml at the root.")


class PluginInstallationForm(forms.ModelForm):
    """The plugin's config with the fields its manifest declares `secret` write-only: not
    shown, sealed when given, kept unless given again (null clears), as agent types' are."""

    class Meta:
        model = PluginInstallation
        fields = ["enabled", "priority", "config"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.schema = folders.config_schema(settings.LANGHOST_PLUGINS_DIR, self.instance.author,
                                            self.instance.name)
        show_config_without_secrets(self, "config", self.instance.config or {})

    def clean_config(self):
        config = self.cleaned_data["config"]
        if not isinstance(config, dict):
            raise forms.ValidationError("The config is a JSON object.")
        return runner_config.sealed(config, self.schema, self.instance.config or {})



@admin.register(PluginInstallation)
class PluginInstallationAdmin(PluginPagesAdmin):
    form = PluginInstallationForm
    list_display = ["plugin_id", "version", "enabled", "status", "listens_to_events",
                    "short_error", "updated_at"]
    list_filter = ["enabled", "status", "listens_to_events"]
    search_fields = ["author", "name"]
    fields = ["author", "name", "version", "enabled", "priority", "config", "installation_uuid",
              "status", "listens_to_events", "page_links", "last_error", "created_at",
              "updated_at"]
    readonly_fields = ["author", "name", "version", "installation_uuid", "status",
                       "listens_to_events", "page_links", "last_error", "created_at",
                       "updated_at"]
    actions = ["enable", "disable"]
    change_list_template = "admin/runners/plugininstallation/change_list.html"

    def has_add_permission(self, request):
        return False  # installed from a package (the upload page) or a folder in the plugins dir

    def get_urls(self):
        return [path("upload/", self.admin_site.admin_view(self.upload_view),
                     name="runners_plugininstallation_upload"), *self.page_urls(),
                *super().get_urls()]

    def upload_view(self, request):
        if not request.user.is_superuser:
            raise PermissionDenied
        form = UploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                installation = install.install_plugin(upload.read(), upload.name)
            except install.PluginRefused as exc:
                form.add_error("file", str(exc))
            else:
                messages.success(request, f"Installed {installation.plugin_id}: the runtime "
                                          "loads it within seconds, its runners listed then.")
                return redirect(reverse("admin:runners_plugininstallation_changelist"))
        return TemplateResponse(request, "admin/runners/plugininstallation/upload.html", {
            **self.admin_site.each_context(request), "title": "Install a plugin",
            "opts": self.model._meta, "form": form})

    def delete_model(self, request, obj):
        install.delete_plugin(obj)

    def delete_queryset(self, request, queryset):
        for installation in queryset:
            install.delete_plugin(installation)

    @admin.display(description="last error")
    def short_error(self, obj):
        return obj.last_error[:80]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if {"enabled", "config", "priority"} & set(form.changed_data):
            self._apply(request, [obj])

    def _apply(self, request, installations):
        for installation in installations:
            install.settings_changed(installation)
        self.message_user(request, "The runtime is restarting "
                          f"{', '.join(i.plugin_id for i in installations)} with the new settings.",
                          messages.INFO)

    @admin.action(description="Enable selected plugins")
    def enable(self, request, queryset):
        queryset.update(enabled=True)
        self._apply(request, list(queryset))

    @admin.action(description="Disable selected plugins")
    def disable(self, request, queryset):
        queryset.update(enabled=False)
        self._apply(request, list(queryset))
