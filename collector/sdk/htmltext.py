"""HTML to plain text, for every service that returns HTML (Mastodon statuses, Tumblr bodies and captions,
Dribbble and Flickr descriptions) or entity-encoded text (Stack Exchange titles and names).

Standard library only (html.parser): entities decoded; paragraphs, headings, list items and `<br>` become line
breaks; script and style dropped; Mastodon's link spans (`invisible` scheme and tail, `ellipsis` middle) joined
back into the whole URL, without an ellipsis; whitespace collapsed. Malformed markup (unclosed or misspelled tags)
degrades to its text, never to an exception, and is read in time linear in its length (`_closable`).
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
        parser.feed(_closable(str(markup)[:MAX_INPUT]))
        parser.close()
    except (AssertionError, ValueError):  # html.parser gives up on some broken declarations: keep what it read
        pass
    text = "".join(parser.parts)
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    text = _LINES.sub("\n", "\n".join(lines)).strip()
    return text or None


# what ends a comment, a marked section (<![CDATA[ …, Office's <![if …) and any other construct, for html.parser
_CLOSERS = {"comment": re.compile(r"--\s*>"), "section": re.compile(r"]\s*]\s*>"), "office": re.compile(r"]\s*>")}
_OPENER = re.compile(r"<(?:!--|!\[([a-zA-Z][-_.a-zA-Z0-9]*)?)?")
_SECTIONS = {
    **dict.fromkeys(("temp", "cdata", "ignore", "include", "rcdata"), "section"),
    **dict.fromkeys(("if", "else", "endif"), "office"),
}


def _closable(markup: str) -> str:
    """`markup` with every `<` that opens what nothing after it can end written as `&lt;` (text, as html.parser
    shows it in the end): a tag after the last `>`, a comment after the last `-->`, a marked section after the
    last `]]>` (or `]>` for Office's). Left in, html.parser (before CPython's fix for CVE-2025-6069) searched the
    rest of the text again for each of them: 100 KB of `<a ` took two minutes, 1 MB of `<svg><![CDATA[` 17 s.
    One pass; the parser's own work is then linear too."""
    last = {"tag": markup.rfind(">")}
    for kind, closer in _CLOSERS.items():
        last[kind] = max((m.start() for m in closer.finditer(markup)), default=-1)

    def opener(match: re.Match[str]) -> str:
        start, text = match.start(), match.group(0)
        if text == "<!--":
            closed = last["comment"] >= start + 4
        elif text.startswith("<!["):
            kind = _SECTIONS.get((match.group(1) or "").lower())
            closed = kind is None or last[kind] >= start + 3  # (an unknown keyword stops the parser at once)
        else:
            closed = last["tag"] > start
        return text if closed else "&lt;" + text[1:]

    return _OPENER.sub(opener, markup)


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
