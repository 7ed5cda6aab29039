"""The documentation: a README that fits on a screen or two, and a MkDocs site that builds with --strict (a broken
link, a page missing from the nav or a link to a missing anchor fails), every page in its nav and every README link
to a page that exists."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.docs_text import DOCS, ROOT, nav_pages


def test_the_site_builds_strictly(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "commands" / "replay" / "index.html").is_file()


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    pages = set(nav_pages())
    assert pages == set(DOCS.rglob("*.md")), "docs/ pages and mkdocs.yml's nav differ"


def test_the_readme_is_short_and_its_links_name_real_pages():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and all((ROOT / link).is_file() for link in links), [l for l in links if not (ROOT / l).is_file()]
