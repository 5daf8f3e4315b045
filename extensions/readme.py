"""README rendering: Markdown (CommonMark + tables) to HTML, then sanitized with nh3 (an
allow-list of tags and attributes; links get rel="noopener noreferrer nofollow"; no scripts,
styles, event handlers or javascript: URLs survive).

The registry renders an author's README at build time, inside the build sandbox
(`extensions.sandboxed_steps`), with a CPU budget of its own: a README that Markdown parsing takes
seconds over is refused, never rendered in a web or worker process. markdown-it-py and nh3 are
server requirements (the client never renders READMEs)."""

from __future__ import annotations

import html

import nh3
from markdown_it import MarkdownIt

_MAX_README_CHARS = 512 * 1024
# What a README's HTML may grow to: about four times its largest text, room for tables of short
# cells. Markdown can make far more of a little (one link reference used thousands of times, each
# writing out a long URL); that README is shown as its text instead.
MAX_README_HTML = 4 * _MAX_README_CHARS

_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "code": {"class"},
    "th": {"align"},
    "td": {"align"},
    "*": {"id"},
}
_URL_SCHEMES = {"http", "https", "mailto"}


def render_readme(text: str | None) -> str:
    """Sanitized HTML for a README (empty for no README), at most MAX_README_HTML characters."""
    if not text:
        return ""
    if len(text) > _MAX_README_CHARS:
        text = text[:_MAX_README_CHARS] + "\n\n*(README truncated)*\n"
    # html=False: raw HTML in the Markdown is escaped, not passed through; nh3 is the second guard.
    rendered = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").render(text)
    cleaned = nh3.clean(
        rendered,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return cleaned if len(cleaned) <= MAX_README_HTML else _as_text(text, len(cleaned))


def _as_text(text: str, rendered: int) -> str:
    """The README as preformatted text (escaped; cut to fit MAX_README_HTML), saying why."""
    note = (
        f"<p><em>This README renders to {rendered:,} characters of HTML (allowed: at most "
        f"{MAX_README_HTML:,}), so it is shown as text.</em></p>\n"
    )
    room = MAX_README_HTML - len(note) - len("<pre></pre>\n")
    body = html.escape(text)
    if len(body) > room:
        body = html.escape(text[: room // 6])  # an escape is at most six characters (&quot;)
    return f"{note}<pre>{body}</pre>\n"
