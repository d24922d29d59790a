"""Knowledge retrieval as a base grows, against the exact answer.

Self-contained: a temporary data dir (SQLite with sqlite-vec, or the database `DATABASE_URL`
names), the scripted OpenAI-compatible server on 127.0.0.1 (`tests/fake_providers.py`,
hashed bag-of-words embeddings). A generated corpus is ingested through the ingestion service
(parse, chunk, embed in batches over HTTP, index): first 10,000 chunks, then up to 100,000.
At each size, in the same run:
  - retrieval through the service, vector and hybrid, timed per query (the query's embedding
    call included);
  - the exact top 5 of the same vectors, brute force with numpy: a hit counts for recall when
    it is as near as the exact 5th (ties of the hashed vectors are equally right).

    .venv/bin/python bench/knowledge.py [--queries 200] [--chunks 100000]

The last line reads `knowledge: recall_at_5=X latency_ratio_100k_vs_10k=Y
ingest_chunks_per_s=Z` (recall of the vector search at the larger size; the latency ratio of
the slower mode, median over median).
"""

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from run_overhead import setup_django

RECALL_BUDGET = 0.95
RATIO_BUDGET = 3.0
SMALL = 10_000
CHUNK_WORDS = 30
CHUNKS_PER_DOCUMENT = 2_000
K = 5


def corpus_words(count: int, rng: random.Random) -> list[str]:
    """A vocabulary with a Zipf-like use: a few common words, many rare ones."""
    vocabulary = [f"w{n}" for n in range(20_000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    return rng.choices(vocabulary, weights=weights, k=count)


def document_text(rng: random.Random, chunks: int) -> str:
    return " ".join(corpus_words(chunks * CHUNK_WORDS, rng))


async def main(queries: int, total: int, data_dir: Path) -> None:
    import numpy
    from asgiref.sync import sync_to_async
    from django.core.files.uploadedfile import SimpleUploadedFile

    from accounts.models import Project, User
    from runners.knowledge import services, vectors
    from runners.knowledge.models import Chunk, KnowledgeBase
    from runners.models import LLMModel, ModelProvider
    from tests.fake_providers import FakeProvider

    server = FakeProvider("openai").start()
    rng = random.Random(7)
    try:
        owner = await User.objects.acreate(email="bench@example.com")
        project = await Project.objects.acreate(name="Bench", slug="bench", owner=owner)
        provider = await ModelProvider.objects.acreate(name="fake", kind="openai",
                                                       base_url=server.base_url)
        model = await LLMModel.objects.acreate(name="embedder", provider=provider,
                                               upstream_model="embedder",
                                               model_type="embedding")
        base = await KnowledgeBase.objects.acreate(
            project=project, name="Corpus", embedding_model=model, chunk_size=CHUNK_WORDS,
            chunk_overlap=0)
        print(f"engine: {await sync_to_async(vectors.engine)()}")
        ingested, ingest_seconds = 0, 0.0
        ratios, recall = [], 0.0
        medians = {}
        for size in (SMALL, total):
            while ingested < size:
                chunks = min(CHUNKS_PER_DOCUMENT, size - ingested)
                upload = SimpleUploadedFile(f"part-{ingested}.txt",
                                            document_text(rng, chunks).encode())
                document = await sync_to_async(services.add_document)(base, upload)
                started = time.perf_counter()
                await services.ingest(document.pk)
                ingest_seconds += time.perf_counter() - started
                ingested += chunks
            base = await KnowledgeBase.objects.select_related("embedding_model").aget(pk=base.pk)
            ids, matrix = await sync_to_async(_vectors)(Chunk, base, numpy, vectors)
            texts = [" ".join(corpus_words(6, rng)) for _ in range(queries)]
            for mode in (KnowledgeBase.Retrieval.VECTOR, KnowledgeBase.Retrieval.HYBRID):
                base.retrieval = mode
                for text in texts[:20]:  # warm-up: caches, connections
                    await services.retrieve(base, text, K)
                seconds, hits = [], []
                for text in texts:
                    started = time.perf_counter()
                    found = await services.retrieve(base, text, K)
                    seconds.append(time.perf_counter() - started)
                    hits.append(found)
                medians[mode, size] = statistics.median(seconds)
                line = (f"{mode:>6} at {ingested:>7} chunks: median {medians[mode, size] * 1000:.2f} "
                        f"ms, p95 {sorted(seconds)[int(0.95 * len(seconds))] * 1000:.2f} ms")
                if mode == KnowledgeBase.Retrieval.VECTOR:
                    recall = _recall(numpy, ids, matrix, texts, hits)
                    line += f", recall@{K} {recall:.3f}"
                print(line, flush=True)
        for mode in (KnowledgeBase.Retrieval.VECTOR, KnowledgeBase.Retrieval.HYBRID):
            ratios.append(medians[mode, total] / medians[mode, SMALL])
        ratio = max(ratios)
        rate = ingested / ingest_seconds
        print(f"ingest: {ingested} chunks in {ingest_seconds:.1f} s")
        verdict = "ok" if recall >= RECALL_BUDGET and ratio <= RATIO_BUDGET else "OVER BUDGET"
        print(f"budgets: recall_at_5 >= {RECALL_BUDGET}, latency ratio <= {RATIO_BUDGET}: "
              f"{verdict}")
        print(f"knowledge: recall_at_5={recall:.3f} latency_ratio_100k_vs_10k={ratio:.2f} "
              f"ingest_chunks_per_s={rate:.0f}")
    finally:
        server.stop()


def _vectors(chunk_model, base, numpy, vectors):
    rows = list(chunk_model.objects.filter(knowledge_base=base).values_list("pk", "vector"))
    matrix = numpy.array([vectors.unpack(bytes(blob)) for _, blob in rows], dtype=numpy.float32)
    matrix /= numpy.linalg.norm(matrix, axis=1, keepdims=True)
    return numpy.array([pk for pk, _ in rows]), matrix


def _recall(numpy, ids, matrix, texts, hits) -> float:
    from tests.fake_providers import bag_of_words

    right = 0
    for text, found in zip(texts, hits, strict=True):
        query = numpy.array(bag_of_words(text), dtype=numpy.float32)
        distances = 1.0 - matrix @ (query / numpy.linalg.norm(query))
        kth = numpy.partition(distances, K - 1)[K - 1]
        nearest = dict(zip(ids.tolist(), distances.tolist(), strict=True))
        right += sum(1 for hit in found if nearest[hit.chunk_id] <= kth + 1e-5)
    return right / (K * len(texts))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="langhost-bench-knowledge-") as tmp:
        setup_django(Path(tmp))
        asyncio.run(main(args.queries, args.chunks, Path(tmp)))
