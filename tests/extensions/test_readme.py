"""README rendering (extensions.readme): sanitized HTML, bounded whatever the Markdown."""

from __future__ import annotations

from extensions.readme import MAX_README_HTML, render_readme


def test_markdown_becomes_sanitized_html() -> None:
    html = render_readme("# Etcd\n\n**pods** <script>alert(1)</script> [x](javascript:alert(1))\n")
    assert "<h1>Etcd</h1>" in html and "<strong>pods</strong>" in html
    assert "<script" not in html and "&lt;script&gt;" in html  # shown as text
    assert 'href="javascript:' not in html


def test_one_link_reference_used_thousands_of_times_is_shown_as_text() -> None:
    # 40 KB of Markdown that renders to about 16 MB of HTML: each use writes the long URL again.
    text = "[r]: https://e.example/" + "a" * 8000 + "\n\n" + "[r]" * 4100 + "\n"
    html = render_readme(text)
    assert len(html) <= MAX_README_HTML
    assert html.startswith("<p><em>This README renders to ")
    assert f"(allowed: at most {MAX_README_HTML:,}), so it is shown as text.</em></p>\n<pre>[r]: https://" in html
    assert html.endswith("[r][r]\n</pre>\n")  # all of it: its escaped text fits


def test_text_too_large_even_escaped_is_cut_to_fit() -> None:
    text = "[r]: https://e.example/" + '"' * 8000 + "\n\n" + "[r]" * 4100 + "\n" + '"<>&' * 120_000
    html = render_readme(text)
    assert "shown as text" in html and len(html) <= MAX_README_HTML
    assert html.endswith("</pre>\n") and "&quot;" in html


def test_a_large_table_of_short_cells_still_renders_as_html() -> None:
    rows = "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 40_000  # 400 KB of Markdown
    html = render_readme(rows)
    assert "shown as text" not in html and html.count("<tr>") == 40_001
    assert len(html) <= MAX_README_HTML
