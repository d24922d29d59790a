"""The README, docs/ and deploy/ link only to what the repository holds."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)|<(https?://[^>]+)>")


@pytest.mark.parametrize("page", ["README.md", *sorted(
    str(path.relative_to(ROOT)) for folder in ("docs", "deploy")
    for path in (ROOT / folder).glob("*.md"))])
def test_every_link_points_into_the_repository(page):
    path = ROOT / page
    for inline, auto in LINK.findall(path.read_text()):
        target = inline or auto
        assert not re.match(r"[a-z]+:", target), f"{page} links outside: {target}"
        if not target.startswith("#"):
            linked = (path.parent / target.split("#")[0]).resolve()
            assert linked.is_relative_to(ROOT), f"{page} links outside: {target}"
            assert linked.exists(), f"{page}: {target} is missing"
