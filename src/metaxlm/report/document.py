"""The report as plain data (sections of tables, figures, text), so Markdown and HTML show exactly the same thing."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    bold: set[tuple[int, int]] = field(default_factory=set)  # (row, column) cells to emphasise
    caption: str = ""
    text_columns: int = 1  # leading columns of names, left-aligned; the rest are numbers, right-aligned


@dataclass
class Figure:
    file: str  # name inside the report's figures directory
    caption: str


@dataclass
class Text:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Section:
    title: str
    blocks: list[Table | Figure | Text | Bullets]
    level: int = 2


def render_markdown(title: str, sections: list[Section], figures_prefix: str = "figures") -> str:
    out = [f"# {title}\n"]
    for section in sections:
        out.append(f"{'#' * section.level} {section.title}\n")
        for block in section.blocks:
            out.append(markdown_block(block, figures_prefix))
    return "\n".join(out)


def markdown_block(block, figures_prefix: str = "figures") -> str:
    if isinstance(block, Text):
        return block.text + "\n"
    if isinstance(block, Bullets):
        return "".join(f"- {item}\n" for item in block.items)
    if isinstance(block, Figure):
        return f"![{block.caption}]({figures_prefix}/{block.file})\n"

    def cell(r: int, c: int, text: str) -> str:
        text = str(text).replace("|", "\\|")  # a literal | would split the Markdown cell
        return f"**{text}**" if (r, c) in block.bold else text

    lines = ["| " + " | ".join(cell(-1, c, h) for c, h in enumerate(block.header)) + " |",
             "|" + "---|" * block.text_columns + "---:|" * (len(block.header) - block.text_columns)]
    lines += ["| " + " | ".join(cell(r, c, s) for c, s in enumerate(row)) + " |" for r, row in enumerate(block.rows)]
    caption = f"{block.caption}\n\n" if block.caption else ""
    return caption + "\n".join(lines) + "\n"
