"""HTML to plain text: the one helper every service that returns HTML uses."""

from __future__ import annotations

import pytest

from collector.sdk.htmltext import first_line, html_to_text


@pytest.mark.parametrize(
    "markup, text",
    [
        ("<p>&quot;quoted&quot; &amp; &#39;single&#39; &lt;tag&gt;</p>", "\"quoted\" & 'single' <tag>"),
        ("<p>one</p><p>two<br>three<br/>four</p>", "one\ntwo\nthree\nfour"),
        (
            '<p>see <a href="https://example.com/a/very/long/path"><span class="invisible">https://</span>'
            '<span class="ellipsis">example.com/a/very</span><span class="invisible">/long/path</span></a></p>',
            "see https://example.com/a/very/long/path",
        ),
        ("<p>x</span}</p>", "x"),  # the misspelled close tag of Mastodon's own documentation example
        ("<p>a <b>bold</b>   move</p>\n\n\n<p>  next </p>", "a bold move\nnext"),
        ("<script>alert(1)</script><style>p{}</style><p>kept</p>", "kept"),
        ("<p>unclosed <i>tags", "unclosed tags"),
        ("plain text, no markup", "plain text, no markup"),
        ("", None),
        (None, None),
        ("<p> </p>", None),
    ],
)
def test_html_to_text(markup, text):
    assert html_to_text(markup) == text


def test_first_line_cuts_at_a_word():
    assert first_line("short\nsecond") == "short"
    long = "word " * 100
    cut = first_line(long, limit=50)
    assert cut.endswith("…") and len(cut) <= 51 and not cut[:-1].endswith(" ")
    assert first_line(None) is None


@pytest.mark.parametrize(
    ("unit", "shown", "between"),
    [
        ("<a ", "<a", " "),  # a tag that never ends
        ("<!--x ", "<!--x", " "),  # a comment that never ends
        ("<![CDATA[x ", "<![CDATA[x", " "),  # a marked section that never ends
        ("<svg><![CDATA[", "<![CDATA[", ""),  # ... between tags that do
        ("<p>a<![if x ", "a<![if x", "\n"),  # an Office section that never ends, in paragraphs
    ],
)
def test_what_never_ends_is_text_and_read_in_one_pass(unit, shown, between):
    """300 KB of openers nothing closes (html.parser before CVE-2025-6069's fix rescanned the rest of the text for
    each: minutes for this much): each shows as text, the tags around them are still markup."""
    count = 300_000 // len(unit)
    assert html_to_text(unit * count) == between.join([shown] * count)
