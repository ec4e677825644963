"""The report's figures (matplotlib, Agg backend). Each function draws one PNG; a model keeps its colour in every
figure (the caller passes `colors`, from report/colors.py), and nothing random or time-dependent goes into the
file, so reruns are identical. Titles and axis labels too wide for their room are wrapped before the layout, so
no text is cut off at the edge of the PNG."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from metaxlm.io import atomic_path
from metaxlm.report.colors import colors_for as colors_for  # re-exported: the sections' entry point

DPI = 110
# Several lines of one model (one colour) in a panel, e.g. one model fine-tuned on several tasks, differ by these.
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _wrap_to_fit(text, room: float, renderer, *, vertical: bool = False) -> None:
    """Re-wrap a Text artist at word boundaries until its long side fits `room` pixels (its width, or its height
    for a rotated y label); explicit line breaks are kept. A word longer than the room is broken."""
    content = text.get_text()
    if not content or not text.get_visible():
        return

    def long_side() -> float:
        extent = text.get_window_extent(renderer)
        return extent.height if vertical else extent.width

    if long_side() <= room:
        return
    lines = content.split("\n")
    longest = max(len(line) for line in lines)
    # Start near the width that should fit, then narrow one character at a time (text width is not linear).
    width = max(8, min(longest - 1, int(longest * room / long_side())))
    while True:
        text.set_text("\n".join(textwrap.fill(line, width) for line in lines))
        if long_side() <= room or width <= 8:
            return
        width -= 1


def _fit_texts(fig) -> None:
    """Wrap the suptitle to the figure's width, and each panel's title and axis labels to the panel (a label of
    a colour bar to the bar's height), so that the layout can find room for all of them. The panels' size before
    the layout is a little smaller than after it: a safe guess."""
    renderer = fig.canvas.get_renderer()
    suptitle = getattr(fig, "_suptitle", None)  # matplotlib keeps no public handle on the suptitle artist
    if suptitle is not None:
        _wrap_to_fit(suptitle, 0.96 * fig.bbox.width, renderer)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for title in (ax.title, ax._left_title, ax._right_title):  # no public accessor for these either
            _wrap_to_fit(title, ax.bbox.width, renderer)
        _wrap_to_fit(ax.xaxis.label, ax.bbox.width, renderer)
        _wrap_to_fit(ax.yaxis.label, ax.bbox.height, renderer, vertical=True)
        if ax.get_legend() is not None:
            _fit_legend(ax, renderer)


def _fit_legend(ax, renderer) -> None:
    """A legend inside its panel: fewer columns while it is wider than the panel, then wrapped names."""
    legend = ax.get_legend()
    ncols = getattr(legend, "_ncols", 1)  # no public getter
    fontsize = legend.get_texts()[0].get_fontsize()
    while legend.get_window_extent(renderer).width > ax.bbox.width and ncols > 1:
        ncols -= 1
        # Drawn again: Legend.set_ncols does not lay the legend out anew. (Our legends set only these two.)
        legend = ax.legend(fontsize=fontsize, ncols=ncols)
    excess = legend.get_window_extent(renderer).width - ax.bbox.width
    if excess > 0:
        widest = max(text.get_window_extent(renderer).width for text in legend.get_texts())
        for text in legend.get_texts():
            _wrap_to_fit(text, widest - excess, renderer)


def _save(fig, path: Path) -> None:
    _fit_texts(fig)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        # Pinned metadata: the default "Software" entry would change with the matplotlib version. The tight box
        # only trims margins (every text fits the figure after _fit_texts), and catches what cannot be wrapped.
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": "metaxlm report"}, bbox_inches="tight",
                    pad_inches=0.05)
    _pyplot().close(fig)


def _panel_grid(n: int, *, max_cols: int, size: tuple[float, float]):
    """A figure with room for `n` panels, at most `max_cols` per row; (figure, flat list of axes)."""
    plt = _pyplot()
    ncols = min(max_cols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols + 0.6, size[1] * nrows), squeeze=False)
    return fig, list(axes.flat)


def _label_panel(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def _save_panels(fig, axes: list, used: int, title: str, path: Path) -> None:
    for ax in axes[used:]:
        ax.set_visible(False)
    fig.suptitle(title)
    _save(fig, path)


def task_bars(path: Path, title: str, ylabel: str, languages: list[str],
              scores: dict[str, dict[str, tuple[float, float]]], colors: dict[str, str]) -> None:
    """Grouped bars: one group per language, one bar per model; `scores[model][lang] = (mean, std)`."""
    plt = _pyplot()
    models = list(scores)
    width = 0.8 / len(models)
    fig, ax = plt.subplots(figsize=(min(16.0, max(6.4, 0.35 * len(languages) * len(models) + 1.5)), 4))
    for i, model in enumerate(models):
        xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(languages))]
        means = [scores[model].get(lang, (math.nan, 0.0))[0] for lang in languages]
        stds = [scores[model].get(lang, (math.nan, 0.0))[1] for lang in languages]
        ax.bar(xs, means, width=width, label=model, color=colors[model],
               yerr=stds if any(stds) else None, capsize=2, error_kw={"elinewidth": 0.8})
    ax.set_xticks(range(len(languages)), languages)
    ax.set_xlabel("language")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", ncols=min(len(models), 4))
    _save(fig, path)


def layer_curves(path: Path, title: str, ylabel: str, panels: dict[str, dict[str, tuple[list[int], list[float]]]],
                 colors: dict[str, str], marked: dict[str, dict[str, int]] | None = None,
                 xlabel: str = "layer (0 = embeddings)") -> None:
    """One panel per data set, one line per model: `panels[dataset][model] = (layers, values)`. `marked[dataset]
    [model]`: a layer whose point is ringed (e.g. the layer chosen on dev; the caller's caption says which)."""
    fig, axes = _panel_grid(len(panels), max_cols=3, size=(4.6, 3.6))
    for ax, (dataset, lines) in zip(axes, panels.items(), strict=False):
        for model, (layers, values) in lines.items():
            ax.plot(layers, values, marker="o", markersize=3, label=model, color=colors[model])
            layer = (marked or {}).get(dataset, {}).get(model)
            if layer in layers:
                ax.plot([layer], [values[layers.index(layer)]], marker="o", markersize=10, fillstyle="none",
                        markeredgewidth=1.5, linestyle="none", color=colors[model])
        _label_panel(ax, dataset, xlabel, ylabel)
    _save_panels(fig, axes, len(panels), title, path)


def step_curves(path: Path, title: str, ylabel: str, series: dict[str, list[tuple[int, float, float]]],
                colors: dict[str, str]) -> None:
    """Score (left) and transfer gap (right, when known) against pretraining step; `series[variant] = [(step,
    target score, gap)]`. Two panels rather than a twin axis: two y-scales on one panel are easy to misread."""
    plt = _pyplot()
    with_gap = any(not math.isnan(gap) for points in series.values() for _, _, gap in points)
    fig, axes = plt.subplots(1, 2 if with_gap else 1, figsize=(10.5 if with_gap else 6.4, 3.8), squeeze=False)
    panels = [(axes[0][0], 1, ylabel)] + ([(axes[0][1], 2, "transfer gap (source − target avg)")] if with_gap else [])
    for ax, column, label in panels:
        for variant, points in series.items():
            points = sorted(points)
            ax.plot([p[0] for p in points], [p[column] for p in points], marker="o", markersize=4, label=variant,
                    color=colors[variant])
        steps = sorted({p[0] for points in series.values() for p in points})
        if len(steps) <= 10:  # ticks at the evaluated checkpoints, not at matplotlib's round numbers
            ax.set_xticks(steps)
        ax.set_xlabel("pretraining step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title)
    _save(fig, path)


def finetune_curves(path: Path, title: str, panels: dict[str, dict[str, list[tuple[int, float, float]]]],
                    ylabels: dict[str, str], colors: dict[str, str], styles: dict[str, int] | None = None) -> None:
    """Test score against fine-tuning step: one panel per (metric, language) key of `panels`, one line per
    model/task with a band of ± one std over seeds: `panels[panel][series] = [(step, mean, std)]`. `colors[series]`
    is the model's colour; `styles[series]` (a small number) picks line style and marker, to tell apart the lines
    of one model (several tasks)."""
    fig, axes = _panel_grid(len(panels), max_cols=2, size=(5.6, 3.8))
    for ax, (panel, lines) in zip(axes, panels.items(), strict=False):
        for series, points in lines.items():
            points = sorted(points)
            steps, means = [p[0] for p in points], [p[1] for p in points]
            style = (styles or {}).get(series, 0)
            ax.plot(steps, means, marker=MARKERS[style % len(MARKERS)], markersize=4, label=series,
                    linestyle=LINESTYLES[style % len(LINESTYLES)], color=colors[series])
            stds = [0.0 if math.isnan(p[2]) else p[2] for p in points]
            if any(stds):
                ax.fill_between(steps, [m - s for m, s in zip(means, stds, strict=True)],
                                [m + s for m, s in zip(means, stds, strict=True)], color=colors[series], alpha=0.15)
        steps = sorted({p[0] for points in lines.values() for p in points})
        if len(steps) <= 10:  # ticks at the evaluated steps
            ax.set_xticks(steps)
        _label_panel(ax, panel, "fine-tuning step", ylabels.get(panel, "score"))
    _save_panels(fig, axes, len(panels), title, path)


def heatmap(path: Path, title: str, languages: list[str], scores: list[list[float]], label: str,
            value_range: tuple[float, float] | None = None) -> None:
    """Transfer-direction matrix: rows = source (fine-tuning) language, columns = target (test) language.
    Pass the same `value_range` to the maps of several models so one colour means one score in all of them."""
    plt = _pyplot()
    n = len(languages)
    size = min(12.0, max(4.5, 0.55 * n + 2))
    fig, ax = plt.subplots(figsize=(size + 1, size))
    finite = [v for row in scores for v in row if not math.isnan(v)]
    low, high = value_range or ((min(finite), max(finite)) if finite else (0.0, 1.0))
    image = ax.imshow(scores, cmap="viridis", aspect="equal", vmin=low, vmax=high)
    middle = (low + high) / 2
    for i in range(n):
        for j in range(n):
            if not math.isnan(scores[i][j]):
                # Dark text on the bright end of viridis, white on the dark end.
                ax.text(j, i, f"{scores[i][j]:.1f}", ha="center", va="center", fontsize=8 if n <= 12 else 6,
                        color="black" if scores[i][j] > middle else "white")
    ax.set_xticks(range(n), languages)
    ax.set_yticks(range(n), languages)
    ax.set_xlabel("target language (test)")
    ax.set_ylabel("source language (fine-tuning)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label=label, shrink=0.8)
    _save(fig, path)
