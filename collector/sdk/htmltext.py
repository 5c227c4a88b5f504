"""HTML to plain text, for every service that returns HTML (Mastodon statuses, Tumblr bodies and captions,
Dribbble and Flickr descriptions) or entity-encoded text (Stack Exchange titles and names).

Standard library only (html.parser): entities decoded; paragraphs, headings, list items and `<br>` become line
breaks; script and style dropped; Mastodon's link spans (`invisible` scheme and tail, `ellipsis` middle) joined
back into the whole URL, without an ellipsis; whitespace collapsed. Malformed markup (unclosed or misspelled tags)
degrades to its text, never to an exception.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

BLOCKS = {
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "blockquote",
    "pre",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "hr",
    "figure",
    "section",
    "article",
}
SKIPPED = {"script", "style", "template"}
MAX_INPUT = 1_000_000  # characters; longer markup is cut before parsing


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in SKIPPED:
            self.skipping += 1
        elif tag in BLOCKS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        tag = tag.rstrip("}")  # a misspelled close tag (`</span}`) still closes
        if tag in SKIPPED:
            self.skipping = max(self.skipping - 1, 0)
        elif tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_LINES = re.compile(r"\n{2,}")


def html_to_text(markup: object) -> str | None:
    """Plain text of `markup` (None for None or empty results)."""
    if markup is None:
        return None
    parser = _Text()
    try:
        parser.feed(str(markup)[:MAX_INPUT])
        parser.close()
    except (AssertionError, ValueError):  # html.parser gives up on some broken declarations: keep what it read
        pass
    text = "".join(parser.parts)
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    text = _LINES.sub("\n", "\n".join(lines)).strip()
    return text or None


def first_line(text: str | None, limit: int = 200) -> str | None:
    """The first non-empty line of a text, at most `limit` characters (cut at a word where possible)."""
    if not text:
        return None
    line = text.strip().split("\n", 1)[0].strip()
    if len(line) <= limit:
        return line or None
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else line[:limit]).rstrip() + "…"


ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
TEXT_FIELDS = ("title", "description", "authorName", "name")


def decode_entities(text: str) -> str:
    """HTML character references in text an API sent escaped (X's `text`, Stack Exchange's titles): `&amp;` →
    `&`, `&lt;` → `<`, numeric ones too. Text without a reference is returned as it is."""
    return html.unescape(text) if "&" in text and ENTITY.search(text) else text


def decode_item_text(item: dict) -> None:
    """The one rule for every connector: every text field of an item with its character references decoded
    (in place). Applied by the engine to every item of every connector, after `map`."""
    for field in TEXT_FIELDS:
        value = item.get(field)
        if isinstance(value, str):
            item[field] = decode_entities(value)
