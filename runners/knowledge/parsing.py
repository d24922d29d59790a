"""A document's text, and the chunks it is cut into.

Text, Markdown, CSV and JSON are read as UTF-8; HTML loses its tags, scripts and styles (the standard
library's parser); PDF is read page by page with `pypdf`, each chunk knowing its page.
Chunks are runs of words (`size` of them, each repeating `overlap` of the one before); a
chunk never spans two pages.
"""

import io
from dataclasses import dataclass, field
from html.parser import HTMLParser

TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown", "text/csv", "application/json"}
HTML_TYPES = {"text/html", "application/xhtml+xml"}
PDF_TYPE = "application/pdf"
SUFFIX_TYPES = {".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
                ".csv": "text/csv", ".json": "application/json", ".html": "text/html",
                ".htm": "text/html",
                ".pdf": PDF_TYPE}


class UnreadableDocument(ValueError):
    """The file is not a document LangHost can read, or is damaged; the message says which."""


@dataclass
class Passage:
    """Text of one part of a document (a page of a PDF, the whole of anything else)."""

    text: str
    metadata: dict = field(default_factory=dict)


def mime_type_of(name: str, declared: str | None, head: bytes = b"") -> str:
    """The document's type: a PDF by its first bytes, else what its upload declared unless
    that says nothing useful, else what its name's suffix says."""
    if head.startswith(b"%PDF-"):
        return PDF_TYPE
    if declared and declared not in ("application/octet-stream", ""):
        return declared.split(";")[0].strip().lower()
    suffix = name[name.rfind("."):].lower() if "." in name else ""
    return SUFFIX_TYPES.get(suffix, declared or "application/octet-stream")


class _TextOfHtml(HTMLParser):
    SKIPPED = {"script", "style", "head", "noscript"}

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIPPED:
            self._skipping += 1

    def handle_endtag(self, tag):
        if tag in self.SKIPPED and self._skipping:
            self._skipping -= 1

    def handle_data(self, data):
        if not self._skipping:
            self.parts.append(data)


def passages(data: bytes, mime_type: str) -> list[Passage]:
    """The document's text, in passages; UnreadableDocument when there is none to read."""
    if mime_type == PDF_TYPE:
        from pypdf import PdfReader  # loaded by the first PDF, not at start
        from pypdf.errors import PdfReadError

        try:
            reader = PdfReader(io.BytesIO(data))
            found = [Passage(page.extract_text() or "", {"page": number})
                     for number, page in enumerate(reader.pages, start=1)]
        except (PdfReadError, ValueError, KeyError, TypeError) as exc:
            raise UnreadableDocument(f"the PDF cannot be read: {exc}") from exc
    elif mime_type in HTML_TYPES or mime_type in TEXT_TYPES or mime_type.startswith("text/"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnreadableDocument(f"the file is not UTF-8 text: {exc}") from exc
        if mime_type in HTML_TYPES:
            parser = _TextOfHtml()
            parser.feed(text)
            text = " ".join(parser.parts)
        found = [Passage(text)]
    else:
        raise UnreadableDocument(f"LangHost reads text, Markdown, HTML and PDF, not {mime_type}")
    if not any(passage.text.strip() for passage in found):
        raise UnreadableDocument("the document holds no text")
    return found


def chunks(found: list[Passage], size: int, overlap: int) -> list[Passage]:
    """The passages cut into runs of `size` words, each repeating `overlap` of the last."""
    step = max(size - min(overlap, size - 1), 1)
    cut = []
    for passage in found:
        words = passage.text.split()
        for start in range(0, len(words), step):
            cut.append(Passage(" ".join(words[start:start + size]), dict(passage.metadata)))
            if start + size >= len(words):
                break
    return cut
