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
from markdown_it.token import Token

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
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    env: dict[str, object] = {}
    tokens = md.parse(text, env)
    # A link reference's URL and title are written out again at each use: counted before anything
    # is written, so that a README that would be megabytes of HTML costs no more than its parse.
    if _attribute_characters(tokens) > MAX_README_HTML:
        return _as_text(text)
    cleaned = nh3.clean(
        md.renderer.render(tokens, md.options, env),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return cleaned if len(cleaned) <= MAX_README_HTML else _as_text(text)


def shown_as_text(readme_html: str) -> bool:
    """Whether render_readme gave the README as text (its HTML would have been too long)."""
    return readme_html.startswith(_TEXT_NOTE)


def _attribute_characters(tokens: list[Token]) -> int:
    return sum(
        len(str(value)) for token in tokens for child in token.children or () for value in (child.attrs or {}).values()
    )


_TEXT_NOTE = "<p><em>This README would be more than "


def _as_text(text: str) -> str:
    """The README as preformatted text (escaped; cut to fit MAX_README_HTML), saying why."""
    text = text.replace("\x00", "\ufffd")  # as Markdown rendering does (NUL cannot be stored)
    room = MAX_README_HTML - 400  # the note and the <pre>
    body = html.escape(text)
    cut = ""
    if len(body) > room:
        kept = room // 6  # an escape is at most six characters (&quot;)
        body = html.escape(text[:kept])
        cut = f" (its first {kept:,} characters)"
    note = (
        f"{_TEXT_NOTE}{MAX_README_HTML:,} characters of HTML (allowed: at most that), "
        f"so it is shown as text{cut}.</em></p>\n"
    )
    return f"{note}<pre>{body}</pre>\n"
