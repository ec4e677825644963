"""The report's figures as a reader sees them: one colour per model in every figure (and in the run's pretraining
plots), and no title or label running off the edge of a PNG."""

import json
import struct
from pathlib import Path

import pytest
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer
from matplotlib.text import Text
from test_report import VARIANTS, _results, _write

from metaxlm.report import plots
from metaxlm.report.colors import PALETTE, colors_for, report_colors
from metaxlm.report.evaluation import write_report
from metaxlm.report.pretraining import compare_variants, plot_comparison
from metaxlm.report.results import collect_results


@pytest.fixture
def drawn(monkeypatch):
    """Every figure the report code saves, by file name: {"figure": matplotlib figure, "path": PNG path}; kept
    open (plots._save closes a figure, which drops its renderer) until the test ends."""
    plt = plots._pyplot()
    close = plt.close
    figures = {}
    save = plots._save

    def recording_save(fig, path: Path) -> None:
        save(fig, path)
        figures[path.name] = {"figure": fig, "path": path}

    monkeypatch.setattr(plots, "_save", recording_save)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    yield figures
    for entry in figures.values():
        close(entry["figure"])


def _legend_colors(fig) -> dict[str, str]:
    """Legend label -> colour of its line or bars, over every panel of a figure."""
    colors = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            artist = handle.patches[0] if isinstance(handle, BarContainer) else handle
            color = artist.get_facecolor() if isinstance(handle, BarContainer) else artist.get_color()
            colors[label] = to_hex(color)
    return colors


def _metrics(run_dir: Path, variant: str, base: float) -> None:
    path = run_dir / "pretrain" / variant / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"step": s, "heldout_loss/en": 5 - base - s / 100,
                                        "heldout_loss/de": 6 - base - s / 100}) + "\n" for s in (0, 50, 100)))


def test_one_colour_per_model_in_every_figure(tmp_path, drawn):
    """Figures hold different subsets of the models, which would shift colours assigned per figure: xlm has no
    retrieval, only metaxlm has fine-tuning curves, xlm has no checkpoint, a model outside any variant has only
    task scores, and only xlm and metaxlm_dict logged pretraining losses."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("variants:\n  xlm: {}\n  metaxlm: {}\n  metaxlm_dict: {}\n")
    for variant in VARIANTS:
        final = _results(variant, 100, final=True)
        if variant == "xlm":
            del final["retrieval"]
        else:
            _write(run, _results(variant, 50, final=False))
        if variant == "metaxlm":
            for task in final["tasks"].values():
                task["curve"] = {"de": {"steps": [10, 20], "accuracy": [task["per_language"]["de"]] * 2}}
        _write(run, final)
    external = _results("metaxlm", 100, final=True)
    external.update(model_name="xlmr", variant=None, step=None)
    for key in ("retrieval", "alignment", "transfer_matrix"):
        del external[key]
    _write(run, external)
    for variant in ("xlm", "metaxlm_dict"):
        _metrics(run, variant, VARIANTS[variant][0])

    compare_variants(run, list(VARIANTS))  # the pretrain stage's plots, coloured from the run config alone
    pretrain_stage = {name: _legend_colors(drawn[name]["figure"])
                      for name in ("heldout_curves.png", "heldout_by_language.png")}
    write_report([run])

    seen: dict[str, dict[str, str]] = {}  # model -> {colour: first figure with it}
    figures = {name: _legend_colors(entry["figure"]) for name, entry in drawn.items()} | {
        f"run/{name}": colors for name, colors in pretrain_stage.items()}
    for name, legend in figures.items():
        for label, color in legend.items():
            model = label.split(" · ")[0]  # fine-tuning curves: "model · task"
            seen.setdefault(model, {}).setdefault(color, name)
    assert {"retrieval.png", "finetune_curves.png", "steps_module.png", "pretraining_run_heldout_curves.png",
            "run/heldout_curves.png", "task_module.png"} <= set(figures)
    assert set(seen) == {"xlm", "metaxlm", "metaxlm_dict", "xlmr"}
    assert {model: len(colors) for model, colors in seen.items()} == dict.fromkeys(seen, 1), seen
    # Config order, then the model outside any variant: the palette's first four colours, each once.
    assert {model: next(iter(colors)) for model, colors in seen.items()} == {
        "xlm": PALETTE[0], "metaxlm": PALETTE[1], "metaxlm_dict": PALETTE[2], "xlmr": PALETTE[3]}
    # The two tasks of metaxlm's curves: one colour, told apart by line style.
    styles = {line.get_label(): line.get_linestyle() for line in drawn["finetune_curves.png"]["figure"].axes[0].lines}
    assert len(set(styles.values())) == 2


def test_fine_tuning_curves_of_a_one_model_report_colour_the_tasks(tmp_path, drawn):
    """configs/translation.yaml's report: one model, one task per initialization. Its lines are the tasks, so
    each gets a colour of its own (and still a line style); with several models a model keeps one colour."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("variants:\n  metaxlm: {}\n")
    final = _results("metaxlm", 100, final=True)
    for task in final["tasks"].values():
        task["curve"] = {"de": {"steps": [10, 20], "accuracy": [task["per_language"]["de"]] * 2}}
    _write(run, final)
    write_report([run])
    lines = drawn["finetune_curves.png"]["figure"].axes[0].lines
    assert len(lines) == len(final["tasks"]) >= 2
    assert len({to_hex(line.get_color()) for line in lines}) == len(lines)
    assert len({line.get_linestyle() for line in lines}) == len(lines)


def test_report_colors_of_two_runs(tmp_path):
    """Two runs with the same variants: the run's name tells them apart, and each keeps one colour for its final
    model, its checkpoints and its variant; a variant that only pretrained has a colour too."""
    for name in ("a", "b"):
        run = tmp_path / name
        run.mkdir()
        (run / "config.yaml").write_text("variants:\n  xlm: {}\n  metaxlm: {}\n")
        _write(run, _results("metaxlm", 50, final=False))
        _write(run, _results("metaxlm", 100, final=True))
    runs = [tmp_path / "a", tmp_path / "b"]
    colors = report_colors(runs, collect_results(runs))
    assert colors == {"a/xlm": PALETTE[0], "a/metaxlm": PALETTE[1], "a/metaxlm@step50": PALETTE[1],
                      "b/xlm": PALETTE[2], "b/metaxlm": PALETTE[3], "b/metaxlm@step50": PALETTE[3]}
    assert colors_for(["x", "y", "x"]) == {"x": PALETTE[0], "y": PALETTE[1]}


LONG = "a long title that is much wider than the figure it belongs to, with even more words after the comma"


def _draw_every_kind(out: Path, panels: int) -> None:
    """Each figure function with long titles, labels and model names, and `panels` panels where it has several."""
    models = colors_for(f"model_{i}_with_a_long_name" for i in range(3))
    lines = {model: ([0, 1, 2, 3], [10.0 + i, 20.0, 30.0 - i, 25.0]) for i, model in enumerate(models)}
    plots.layer_curves(out / "layers.png", f"Sentence retrieval accuracy@1 against layer: {LONG}",
                       f"accuracy@1 (%), {LONG}", {f"set {p}: {LONG}": lines for p in range(panels)}, models)
    points = {model: [(10, 1.0 + i, 0.1), (20, 2.0 + i, 0.2)] for i, model in enumerate(models)}
    plots.finetune_curves(out / "finetune.png", LONG, {f"bleu {p} · {LONG}": points for p in range(panels)},
                          {f"bleu {p} · {LONG}": f"bleu, {LONG}" for p in range(panels)}, models)
    series = {model: [(50, 60.0 + i, 5.0), (100, 70.0 + i, 4.0)] for i, model in enumerate(models)}
    plots.step_curves(out / "steps.png", LONG, f"average target accuracy (%), {LONG}", series, models)
    langs = [f"l{i}" for i in range(panels + 1)]
    plots.task_bars(out / "bars.png", LONG, f"accuracy (%), {LONG}", langs,
                    {model: {lang: (50.0 + i, 1.0) for lang in langs} for i, model in enumerate(models)}, models)
    plots.heatmap(out / "heatmap.png", f"{next(iter(models))}: {LONG}", langs,
                  [[float(i + j) for j in range(len(langs))] for i in range(len(langs))], f"score, {LONG}")


def _undrawn_tick_labels(fig) -> set:
    """The labels of ticks outside an axis' view, which matplotlib keeps (with stale positions) but does not
    draw; and every text of a hidden panel."""
    hidden = set()
    for ax in fig.axes:
        if not ax.get_visible():
            hidden |= set(ax.findobj(Text))
            continue
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            hidden |= {label for tick in axis.majorTicks + axis.minorTicks
                       if not low - 1e-9 <= tick.get_loc() <= high + 1e-9 for label in (tick.label1, tick.label2)}
    return hidden


def _png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])  # the IHDR chunk: width, height


@pytest.mark.parametrize("panels", [1, 2, 3, 4])
def test_no_text_runs_off_a_figure(tmp_path, drawn, panels):
    """Every title, label, legend and tick text lies inside the figure, so the saved PNG shows all of it (the
    tight box only trims margins: the PNG is never larger than the figure)."""
    _draw_every_kind(tmp_path, panels)
    comparison = {"pivot": "en", "languages": ["en", "de"], "final": {"xlm": {"en": 4.0, "de": 5.0}},
                  "curves": {"xlm": {"0": 6.0, "100": 5.0}}}
    plot_comparison(comparison, tmp_path / "curves.png", tmp_path / "by_language.png", {"xlm": PALETTE[0]})
    assert len(drawn) == 7
    for name, entry in drawn.items():
        fig = entry["figure"]
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        canvas = fig.bbox  # in display pixels at the figure's own dpi
        undrawn = _undrawn_tick_labels(fig)
        texts = [t for t in fig.findobj(Text) if t.get_text() and t.get_visible() and t not in undrawn]
        outside = []
        for text in texts:
            box = text.get_window_extent(renderer)
            if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
                outside.append((text.get_text()[:40], [round(v) for v in box.extents]))
        assert not outside, f"{name}: text outside the {canvas.width:.0f}x{canvas.height:.0f} figure: {outside}"
        tight = fig.get_tightbbox(renderer)  # what bbox_inches="tight" saves, in inches
        assert tight.x0 >= -0.01 and tight.y0 >= -0.01 and tight.x1 <= fig.get_figwidth() + 0.01 \
            and tight.y1 <= fig.get_figheight() + 0.01, f"{name}: drawn outside the figure: {tight}"
        width, height = _png_size(entry["path"])
        assert width / plots.DPI <= fig.get_figwidth() + 0.1 and height / plots.DPI <= fig.get_figheight() + 0.1, name
