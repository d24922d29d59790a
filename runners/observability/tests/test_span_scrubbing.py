"""What a span's texts look like once scrubbed for export: no token of a query (with or
without its `?`), an attachment link, a bearer header or a JWT; the rest as it was."""

from runners.observability.scrubbing import scrubbed, scrubbed_value

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJ1c2VyX2lkIjoxfQ.c2lnbmF0dXJl"


def test_credentials_are_redacted_wherever_a_text_carries_them():
    assert scrubbed(f"GET /ws/runs?token={JWT}&page=2") == "GET /ws/runs?token=REDACTED&page=2"
    assert scrubbed("token=abc&x=1") == "token=REDACTED&x=1"  # url.query has no `?`
    assert scrubbed("/api/v1/runs/r1/attachments/tok-123?download=1") == \
        "/api/v1/runs/r1/attachments/REDACTED?download=1"
    assert scrubbed("Bearer abc.def") == "Bearer REDACTED"
    assert scrubbed(f"failed for {JWT}") == "failed for REDACTED"
    assert scrubbed_value(["a?key=1", 3]) == ["a?key=REDACTED", 3]


def test_texts_without_credentials_are_left_alone():
    for text in ("GET /api/v1/runs?page=2&ordering=-started_at", "invoke_agent Calculator",
                 "/api/v1/projects/1/knowledge-bases"):
        assert scrubbed(text) == text
