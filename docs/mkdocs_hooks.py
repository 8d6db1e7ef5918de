"""MkDocs hook: the figures a page shows live in the repository's figures/, outside docs/.

Pages link them as `../figures/demo-minilm/overview.png`, which a code host's file view resolves. For the site,
each figure a page names is added to the site's files as `figures/...`, and the links are pointed there, so
`mkdocs build --strict` checks them like any other link (a missing figure is an error).
"""
from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
FIGURE_LINK = re.compile(r"\]\(\.\./(figures/[^)\s]+)\)")


def on_files(files, config):
    named = set()
    for page in Path(config["docs_dir"]).glob("*.md"):
        named.update(FIGURE_LINK.findall(page.read_text(encoding="utf-8")))
    for path in sorted(named):
        if (ROOT / path).is_file():  # a missing one stays missing: the link check reports it
            files.append(File(path, src_dir=str(ROOT), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    return FIGURE_LINK.sub(r"](\1)", markdown) if "/" not in page.file.src_uri else markdown
