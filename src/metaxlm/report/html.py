"""One self-contained HTML file: inline CSS, PNG figures as base64 data URIs, no external links, so it can be mailed
or opened from anywhere without the figures directory beside it."""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from metaxlm.report.document import Bullets, Figure, Section, Table, Text

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 1.4em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
th.name, td.name { text-align: left; }
th { background: #f4f4f4; }
tbody tr:nth-child(even) { background: #fafafa; }
.wide { overflow-x: auto; }
.caption { color: #555; font-size: 0.9em; margin-bottom: .2em; }
figure { margin: 1em 0 1.6em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; box-sizing: border-box; }  /* border inside the 100 % */
figcaption { color: #555; font-size: 0.9em; }
nav ul { columns: 2; }
code { background: #f4f4f4; padding: 0 .2em; }
"""  # noqa: E501 (the stylesheet, kept byte-identical)


def render_html(title: str, sections: list[Section], figures_dir: Path) -> str:
    anchors = [_anchor(s.title, i) for i, s in enumerate(sections)]
    toc = "".join(f'<li><a href="#{a}">{escape(s.title)}</a></li>'
                  for a, s in zip(anchors, sections, strict=True) if s.level == 2)
    body = [f"<h1>{escape(title)}</h1>", f"<nav><ul>{toc}</ul></nav>"]
    for anchor, section in zip(anchors, sections, strict=True):
        body.append(f'<h{section.level} id="{anchor}">{escape(section.title)}</h{section.level}>')
        body += [_block(b, figures_dir) for b in section.blocks]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _anchor(title: str, index: int) -> str:
    return f"s{index}-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _inline(text: str) -> str:
    # The Markdown text blocks use `code` spans only; show them the same way here.
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))


def _block(block, figures_dir: Path) -> str:
    if isinstance(block, Text):
        return f"<p>{_inline(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Figure):
        data = base64.b64encode((figures_dir / block.file).read_bytes()).decode("ascii")
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(block.caption)}">'
                f"<figcaption>{escape(block.caption)}</figcaption></figure>")
    assert isinstance(block, Table)

    def cell(tag: str, r: int, c: int, text: str) -> str:
        # cells wrap at spaces to fit the page; "61.0 ± 1.4" may break before "±" (two lines), never after it
        text = escape(str(text)).replace("± ", "±&nbsp;")
        text = f"<strong>{text}</strong>" if (r, c) in block.bold else text
        return f'<{tag} class="name">{text}</{tag}>' if c < block.text_columns else f"<{tag}>{text}</{tag}>"

    head = "<tr>" + "".join(cell("th", -1, c, h) for c, h in enumerate(block.header)) + "</tr>"
    rows = "".join("<tr>" + "".join(cell("td", r, c, s) for c, s in enumerate(row)) + "</tr>"
                   for r, row in enumerate(block.rows))
    caption = f'<div class="caption">{_inline(block.caption)}</div>' if block.caption else ""
    # A table still wider than the page once its cells wrap scrolls instead of overflowing.
    return f'{caption}<div class="wide"><table><thead>{head}</thead><tbody>{rows}</tbody></table></div>'
