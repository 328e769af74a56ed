"""An HTML checker for the landing page: every link and image it holds, and which are broken."""

from __future__ import annotations

import base64
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a" and found.get("href"):
            self.hrefs.append(found["href"])
        if tag == "img" and found.get("src"):
            self.images.append(found["src"])


def links(page: str) -> tuple[list[str], list[str]]:
    """(hrefs, image sources) of ``page``."""
    parser = _Links()
    parser.feed(page)
    return parser.hrefs, parser.images


def broken_links(page_path: Path) -> list[str]:
    """The page's links that lead nowhere: a relative href that is no file beside the page, an
    absolute URL (the page must work offline), an image that is not a decodable data URI."""
    hrefs, images = links(page_path.read_text())
    broken = []
    for href in hrefs:
        target = urlparse(href)
        if (
            target.scheme
            or target.netloc
            or not (page_path.parent / unquote(target.path)).is_file()
        ):
            broken.append(href)
    for src in images:
        head, _, data = src.partition(",")
        try:
            ok = (
                head.startswith("data:image/")
                and head.endswith(";base64")
                and base64.b64decode(data, validate=True)
            )
        except ValueError:
            ok = False
        if not ok:
            broken.append(src[:60])
    return broken
