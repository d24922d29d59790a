import pytest

from runners.models import LLMModel, ModelProvider
from runners.providers.secrets import set_api_key
from runners.tests.conftest import admin_browser, llm_plugin_gateway, own_gateway  # noqa: F401  (fixtures)
from tests.fake_providers import openai_server  # noqa: F401  (a fixture)


@pytest.fixture
def embedding_model(db, openai_server):  # noqa: F811
    provider = ModelProvider.objects.create(name="fake-embeddings", kind="openai",
                                            base_url=openai_server.base_url, timeout=30)
    set_api_key(provider, "sk-knowledge-tests")
    provider.save()
    return LLMModel.objects.create(name="fake-embedder", provider=provider,
                                   upstream_model="embedder", model_type="embedding",
                                   input_price_per_mtok=1)


def pdf_with(*pages: str) -> bytes:
    """A real PDF whose pages hold these texts (Helvetica, one line each)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None,
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        content = len(objects)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n"
            "%%EOF\n").encode()
    return out
