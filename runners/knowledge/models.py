"""A project's knowledge: knowledge bases, the documents uploaded to them, and the chunks
their text is cut into, each with its embedding (float32, little-endian, as the vector
indexes store it)."""

import uuid

from django.db import models

from accounts.models import Project
from runners.models import LLMModel


class KnowledgeBase(models.Model):
    class Retrieval(models.TextChoices):
        VECTOR = "vector", "Vector search"
        HYBRID = "hybrid", "Hybrid (vector and keywords, fused by rank)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE,
                                related_name="knowledge_bases")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, max_length=10_000)
    embedding_model = models.ForeignKey(
        LLMModel, on_delete=models.PROTECT, related_name="knowledge_bases",
        limit_choices_to={"model_type": LLMModel.Type.EMBEDDING},
        help_text="The embedding model its chunks and queries are embedded with.")
    chunk_size = models.PositiveIntegerField(
        default=300, help_text="Words per chunk.")
    chunk_overlap = models.PositiveIntegerField(
        default=50, help_text="Words each chunk repeats of the one before.")
    top_k = models.PositiveIntegerField(default=5, help_text="Chunks a retrieval returns.")
    retrieval = models.CharField(
        max_length=16, choices=Retrieval.choices, default=Retrieval.HYBRID,
        help_text="Hybrid adds a keyword search to the vector search and fuses both rankings.")
    rerank_model = models.ForeignKey(
        LLMModel, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        limit_choices_to={"model_type": LLMModel.Type.RERANK},
        help_text="Optional: a rerank model that orders the candidates found before the top k "
                  "are kept.")
    engine = models.CharField(
        max_length=257, blank=True, default="",
        help_text='A plugin whose knowledge engine keeps the base ("author/name", LangBot\'s '
                  "KnowledgeEngine): its documents go to the engine's ingestion and retrieval "
                  "asks the engine. Empty: LangHost's own chunks and vectors.")
    engine_settings = models.JSONField(
        default=dict, blank=True,
        help_text="The engine's creation settings (its `creation_schema`); secret fields are "
                  "write-only.")
    retrieval_settings = models.JSONField(
        default=dict, blank=True, help_text="The engine's retrieval settings (its "
                                            "`retrieval_schema`).")
    # Fixed by the first embedding: every vector of the base has this many dimensions.
    dimensions = models.PositiveIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"],
                                               name="knowledge_base_name_per_project")]

    def __str__(self):
        return self.name


class KnowledgeDocument(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        PARSING = "parsing"
        EMBEDDING = "embedding"
        READY = "ready"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE,
                                       related_name="documents")
    file = models.FileField(upload_to="knowledge/%Y/%m/")
    name = models.CharField(max_length=255)
    mime_type = models.CharField(max_length=127)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED,
                              db_index=True)
    status_reason = models.TextField(blank=True)
    progress = models.FloatField(default=0.0, help_text="0 to 1, through parsing and embedding.")
    chunk_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name


class Chunk(models.Model):
    document = models.ForeignKey(KnowledgeDocument, on_delete=models.CASCADE,
                                 related_name="chunks")
    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE,
                                       related_name="chunks")
    position = models.PositiveIntegerField()
    text = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    vector = models.BinaryField()

    class Meta:
        ordering = ["document", "position"]
        constraints = [models.UniqueConstraint(fields=["document", "position"],
                                               name="chunk_position_per_document")]

    def __str__(self):
        return f"{self.document_id}#{self.position}"


class PluginVector(models.Model):
    """An item of a plugin's own vector collection (the SDK's `vector_*` actions): kept
    apart from every other plugin's collections and from the knowledge bases."""

    owner = models.CharField(max_length=255, help_text="The plugin: author/name.")
    collection = models.CharField(max_length=255)
    item_id = models.CharField(max_length=255)
    vector = models.BinaryField()
    dimensions = models.PositiveIntegerField()
    document = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["owner", "collection", "item_id"]
        constraints = [models.UniqueConstraint(fields=["owner", "collection", "item_id"],
                                               name="plugin_vector_id_per_collection")]

    def __str__(self):
        return f"{self.owner}:{self.collection}/{self.item_id}"

    @property
    def partition(self) -> str:
        return partition_of(self.owner, self.collection)


def partition_of(owner: str, collection: str) -> str:
    return f"{owner}\x1f{collection}"
