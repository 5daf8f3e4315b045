"""README rendering (extensions.readme): sanitized HTML, bounded whatever the Markdown."""

from __future__ import annotations

import time

from extensions.readme import MAX_README_HTML, render_readme, shown_as_text

NOTE = f"<p><em>This README would be more than {MAX_README_HTML:,} characters of HTML (allowed: at most that), "


def test_markdown_becomes_sanitized_html() -> None:
    html = render_readme("# Etcd\n\n**pods** <script>alert(1)</script> [x](javascript:alert(1))\n")
    assert "<h1>Etcd</h1>" in html and "<strong>pods</strong>" in html
    assert "<script" not in html and "&lt;script&gt;" in html  # shown as text
    assert 'href="javascript:' not in html
    assert not shown_as_text(html)


def test_one_link_reference_used_thousands_of_times_is_shown_as_text_without_rendering_it() -> None:
    # 40 KB of Markdown that would be about 16 MB of HTML: each use writes the long URL again.
    text = "[r]: https://e.example/" + "a" * 8000 + ' "title"\n\n' + "[r]" * 4100 + "\n\x00"
    started = time.process_time()
    html = render_readme(text)
    assert time.process_time() - started < 1  # counted, never written out
    assert shown_as_text(html) and len(html) <= MAX_README_HTML
    assert html.startswith(NOTE + "so it is shown as text.</em></p>\n<pre>[r]: https://e.example/aaa")
    assert html.endswith("[r][r]\n\ufffd</pre>\n")  # all of it (NUL as Markdown shows it: it cannot be stored)


def test_text_too_large_even_escaped_is_cut_to_fit_and_says_so() -> None:
    text = "[r]: https://e.example/" + '"' * 8000 + "\n\n" + "[r]" * 4100 + "\n" + '"<>&' * 120_000
    html = render_readme(text)
    assert html.startswith(NOTE + "so it is shown as text (its first 349,458 characters).</em></p>\n<pre>")
    assert len(html) <= MAX_README_HTML and html.endswith("</pre>\n") and "&quot;" in html


def test_a_large_table_of_short_cells_still_renders_as_html() -> None:
    rows = "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 40_000  # 400 KB of Markdown
    html = render_readme(rows)
    assert not shown_as_text(html) and html.count("<tr>") == 40_001
    assert len(html) <= MAX_README_HTML
