"""README rendering: Markdown (CommonMark + tables) to HTML, then sanitized with nh3 (an
allow-list of tags and attributes; links get rel="noopener noreferrer nofollow"; no scripts,
styles, event handlers or javascript: URLs survive).

The registry renders an author's README at build time, inside the build sandbox
(`extensions.sandboxed_steps`), with a CPU budget of its own: a README that Markdown parsing takes
seconds over is refused, never rendered in a web or worker process. markdown-it-py and nh3 are
server requirements (the client never renders READMEs)."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_MAX_README_CHARS = 512 * 1024

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
    """Sanitized HTML for a README (empty for no README)."""
    if not text:
        return ""
    if len(text) > _MAX_README_CHARS:
        text = text[:_MAX_README_CHARS] + "\n\n*(README truncated)*\n"
    # html=False: raw HTML in the Markdown is escaped, not passed through; nh3 is the second guard.
    html = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").render(text)
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
