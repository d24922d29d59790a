"""Knowledge bases and their documents in the admin: each document's status and progress as
ingestion moves it along; deleting one (or a base) removes its chunks and vectors too. A
base's page uploads several files at once and has a "Test retrieval" box: a query, and the
chunks the same service as every runner's retrieval finds, with their scores and citations."""

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from runners.admin.secret_fields import show_config_without_secrets
from runners.knowledge import engines, services, worker
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument
from runners.providers.errors import ProviderError


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's own recipe): a list of uploads."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = data if isinstance(data, (list, tuple)) else [data]
        return [super(MultipleFileField, self).clean(file, initial) for file in files]


class UploadForm(forms.Form):
    files = MultipleFileField(help_text="One or more text, Markdown, HTML or PDF files.")


class RetrievalForm(forms.Form):
    query = forms.CharField(max_length=4000, widget=forms.TextInput(attrs={"size": 80}))
    top_k = forms.IntegerField(min_value=1, max_value=50, required=False,
                               help_text="Chunks to return (the base's own top k if empty).")


class DocumentInline(admin.TabularInline):
    model = KnowledgeDocument
    fields = ["name", "mime_type", "size", "status", "progress", "chunk_count", "status_reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False  # uploaded over the API (multipart), ingested in the background


class KnowledgeBaseForm(forms.ModelForm):
    class Meta:
        model = KnowledgeBase
        fields = ["project", "name", "description", "embedding_model", "chunk_size",
                  "chunk_overlap", "top_k", "retrieval", "rerank_model", "engine",
                  "engine_settings", "retrieval_settings"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # chosen when the base is made
            self.fields["engine"].disabled = True
        for field in ("engine_settings", "retrieval_settings"):
            show_config_without_secrets(self, field, getattr(self.instance, field) or {})

    def clean(self):
        """An engine's settings checked against its forms, as the API checks them."""
        cleaned = super().clean()
        engine = cleaned.get("engine")
        if engine and not self.errors:
            try:
                cleaned["engine_settings"], cleaned["retrieval_settings"] = (
                    engines.checked_settings(engine, cleaned.get("engine_settings"),
                                             cleaned.get("retrieval_settings"),
                                             self.instance if self.instance.pk else None))
            except ValueError as exc:
                for field, problem in exc.args[0].items():
                    self.add_error(field, str(problem))
        return cleaned

    def clean_embedding_model(self):
        model = self.cleaned_data["embedding_model"]
        if (self.instance.pk and self.instance.dimensions
                and model.pk != self.instance.embedding_model_id):
            raise forms.ValidationError("The knowledge base holds vectors of its model already; "
                                        "make a new base for another model.")
        return model


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):
    form = KnowledgeBaseForm
    list_display = ["name", "project", "embedding_model", "retrieval", "rerank_model",
                    "dimensions", "updated_at"]
    list_filter = ["project", "retrieval"]
    search_fields = ["name", "description", "project__name"]
    readonly_fields = ["id", "dimensions", "created_at", "updated_at"]
    autocomplete_fields = ["project"]
    inlines = [DocumentInline]
    change_form_template = "admin/knowledge/knowledgebase/change_form.html"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            services.knowledge_base_created(obj)  # once the admin's transaction commits

    def get_urls(self):
        return [
            path("<path:object_id>/upload/", self.admin_site.admin_view(self.upload_view),
                 name="knowledge_knowledgebase_upload"),
            path("<path:object_id>/retrieve/", self.admin_site.admin_view(self.retrieve_view),
                 name="knowledge_knowledgebase_retrieve"),
            *super().get_urls(),
        ]

    def _base(self, request, object_id, change: bool) -> KnowledgeBase:
        knowledge_base = get_object_or_404(
            KnowledgeBase.objects.select_related("embedding_model", "project"), pk=object_id)
        allowed = (self.has_change_permission if change else self.has_view_permission)(
            request, knowledge_base)
        if not allowed:
            raise PermissionDenied
        return knowledge_base

    def upload_view(self, request, object_id):
        """Several files at once, queued for ingestion in the background."""
        knowledge_base = self._base(request, object_id, change=True)
        change_page = reverse("admin:knowledge_knowledgebase_change", args=[knowledge_base.pk])
        form = UploadForm(request.POST or None, request.FILES or None)
        if request.method != "POST" or not form.is_valid():
            for error in form.errors.get("files", []):
                messages.error(request, error)
            return redirect(change_page)
        try:
            documents = services.add_documents(knowledge_base, form.cleaned_data["files"])
        except services.DocumentTooLarge as exc:
            messages.error(request, str(exc))
            return redirect(change_page)
        worker.wake()
        messages.success(request, f"{len(documents)} document(s) queued for ingestion: "
                                  f"{', '.join(document.name for document in documents)}.")
        return redirect(change_page)

    def retrieve_view(self, request, object_id):
        """Test retrieval: what the base answers a query, as runners get it."""
        knowledge_base = self._base(request, object_id, change=False)
        form = RetrievalForm(request.GET if "query" in request.GET else None)
        hits, error = None, ""
        if form.is_valid():
            try:
                hits = async_to_sync(services.retrieve)(
                    knowledge_base, form.cleaned_data["query"], form.cleaned_data["top_k"])
            except ProviderError as exc:
                error = str(exc)
        return TemplateResponse(request, "admin/knowledge/knowledgebase/retrieve.html", {
            **self.admin_site.each_context(request), "title": f"Test retrieval: "
            f"{knowledge_base.name}", "opts": self.model._meta, "original": knowledge_base,
            "form": form, "hits": hits, "error": error})

    def delete_model(self, request, obj):
        services.delete_knowledge_base(obj)

    def delete_queryset(self, request, queryset):
        for knowledge_base in queryset:
            services.delete_knowledge_base(knowledge_base)


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(admin.ModelAdmin):
    list_display = ["name", "knowledge_base", "status", "progress", "chunk_count", "updated_at"]
    list_filter = ["status", "knowledge_base"]
    search_fields = ["name", "sha256", "knowledge_base__name"]
    readonly_fields = ["id", "knowledge_base", "file", "name", "mime_type", "size", "sha256",
                       "status", "status_reason", "progress", "chunk_count", "created_at",
                       "updated_at"]

    def has_add_permission(self, request):
        return False

    def delete_model(self, request, obj):
        services.delete_document(obj)

    def delete_queryset(self, request, queryset):
        for document in queryset:
            services.delete_document(document)
