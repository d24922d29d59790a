"""Knowledge bases and their documents in the admin: each document's status and progress as
ingestion moves it along; deleting one (or a base) removes its chunks and vectors too."""

from django.contrib import admin

from runners.knowledge import services
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument


class DocumentInline(admin.TabularInline):
    model = KnowledgeDocument
    fields = ["name", "mime_type", "size", "status", "progress", "chunk_count", "status_reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False  # uploaded over the API (multipart), ingested in the background


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "embedding_model", "dimensions", "updated_at"]
    list_filter = ["project"]
    search_fields = ["name", "description", "project__name"]
    readonly_fields = ["id", "dimensions", "created_at", "updated_at"]
    autocomplete_fields = ["project"]
    inlines = [DocumentInline]

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
