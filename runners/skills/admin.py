"""Skills in the admin: the installed ones with their instructions and files, an upload page
(a zip: preview what it holds, then install), and removal through the skill store."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from runners.skills import services
from runners.skills.models import Skill


class UploadForm(forms.Form):
    file = forms.FileField(help_text="A zip of one or more skill packages: a directory with a "
                                     "SKILL.md (name, description, instructions) and its files.")


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "description", "revision", "updated_at"]
    search_fields = ["name", "display_name", "description"]
    readonly_fields = ["name", "display_name", "description", "instructions", "revision",
                       "files", "created_at", "updated_at"]
    change_list_template = "admin/skills/skill/change_list.html"

    def has_add_permission(self, request):
        return False  # installed from a zip: the upload page

    def get_urls(self):
        return [path("upload/", self.admin_site.admin_view(self.upload_view),
                     name="skills_skill_upload"), *super().get_urls()]

    def upload_view(self, request):
        """Preview a zip's skills, or install them."""
        if not request.user.is_superuser:
            raise PermissionDenied
        form = UploadForm(request.POST or None, request.FILES or None)
        previewed = None
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                if "install" in request.POST:
                    installed = services.install(upload.read(), upload.name)
                    messages.success(request, "Installed: " + ", ".join(
                        skill.name for skill in installed) + ".")
                    return redirect(reverse("admin:skills_skill_changelist"))
                previewed = services.preview(upload.read(), upload.name)
            except services.SkillError as exc:
                form.add_error("file", str(exc))
        return TemplateResponse(request, "admin/skills/skill/upload.html", {
            **self.admin_site.each_context(request), "title": "Upload skills",
            "opts": self.model._meta, "form": form, "previewed": previewed})

    def delete_model(self, request, obj):
        services.delete(obj)

    def delete_queryset(self, request, queryset):
        for skill in queryset:
            services.delete(skill)
