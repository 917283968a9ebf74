"""What a reader of the plots tripped over (issue 30): a title clipped by the figure or under
the legend, point labels on top of one another, two policies in nearly one colour, a time axis
in another unit than docs/plots.md says, a 150 MiB curve on an 80 GiB axis, a fits plot that
says how many points fit but not which policies, and a comparison table 340 columns wide."""
import itertools
import re

import matplotlib.colors
import pytest

from conftest import memsim
import compare
import memsim_style as ms
import plot_memory
import plot_sweep


def drawn(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


@pytest.fixture
def figures(monkeypatch):
    """The figures the scripts save, kept open instead of written."""
    kept = []

    def keep(fig, path, dpi=100):
        kept.append(fig)
        return path

    monkeypatch.setattr(ms, "save", keep)
    return kept


def lab(colour):
    """CIELAB (D65) of an sRGB colour."""
    rgb = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in matplotlib.colors.to_rgb(colour)]
    x = (0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2]) / 0.95047
    y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    z = (0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2]) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_built_in_policies_have_distinct_colours():
    listing = memsim("list", "policies").stdout
    policies = re.findall(r"^  ([a-z][a-z0-9-]*)\s", listing, flags=re.M)
    assert len(policies) >= 10 and "vdnn" in policies and "dtr" in policies
    for a, b in itertools.combinations(policies, 2):
        d = sum((p - q) ** 2 for p, q in zip(lab(ms.policy_colour(a)), lab(ms.policy_colour(b)))) ** 0.5
        assert d >= 25, f"{a} ({ms.policy_colour(a)}) and {b} ({ms.policy_colour(b)}) are {d:.1f} apart in CIELAB"


def test_pareto_is_in_ms_and_its_title_legend_and_labels_stand_clear(sweep_csv):
    df = plot_sweep.read_results(sweep_csv)
    fig, _ = plot_sweep.pareto_figure(df)
    renderer = drawn(fig)
    axes = [ax for ax in fig.axes if ax.get_xlabel()]
    assert axes and all(ax.get_xlabel() == "iteration time (ms)" for ax in axes)
    # The x values are ms: the largest tick covers the slowest point's time x 1000.
    slowest = df.loc[df["status"] == "ok", "iteration_time_s"].max()
    assert max(ax.get_xlim()[1] for ax in fig.axes) >= slowest * 1e3
    figure_box = fig.bbox
    title = fig._suptitle.get_window_extent(renderer)
    assert figure_box.x0 <= title.x0 and title.x1 <= figure_box.x1 and title.y1 <= figure_box.y1
    legend = fig.legends[0].get_window_extent(renderer)
    assert legend.x1 <= figure_box.x1 and not legend.overlaps(title)
    for ax in fig.axes:
        assert not title.overlaps(ax.get_tightbbox(renderer)), ax.get_title()
        assert not legend.overlaps(ax.get_window_extent(renderer)), ax.get_title()
        labels = [t.get_window_extent(renderer) for t in ax.texts]
        assert labels, ax.get_title()
        for a, b in itertools.combinations(labels, 2):
            assert not a.overlaps(b), ax.get_title()


def test_fits_says_which_policies_fit(sweep_csv):
    df = plot_sweep.read_results(sweep_csv)
    fig, frame = plot_sweep.fits_figure(df, "workload.batch")
    drawn(fig)
    policies = list(dict.fromkeys(df["policy"]))
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == df["workload"].nunique() * df["device"].nunique()
    assert [t.get_text() for t in panels[0].get_yticklabels()] == policies
    # keep-all at batch 512 does not fit on the V100, none does: the cells say so.
    cell = frame.set_index(["device", "policy", "workload.batch"])["state"]
    assert cell[("v100-16gb", "keep-all", "512")] == "oom"
    assert cell[("v100-16gb", "none", "512")] == "fits"
    ax = next(a for a in panels if "v100-16gb" in a.get_title())
    image = ax.get_images()[0]
    rgba = image.cmap(image.norm(image.get_array()))
    values = sorted(set(df["workload.batch"]), key=float)
    y, x = policies.index("keep-all"), values.index("512")
    assert matplotlib.colors.to_hex(rgba[y, x]) == plot_sweep.FIT_COLOURS["oom"]
    assert matplotlib.colors.to_hex(rgba[policies.index("none"), x]) == plot_sweep.FIT_COLOURS["fits"]


def test_memory_axis_is_scaled_to_the_curve(runs, figures):
    # resnet50 peaks at 5.4 GiB of 40 GiB: no capacity line, the axis ends near the peak.
    plot_memory.main([str(runs("default"))])
    ax = figures[-1].axes[0]
    peak = ms.read_summary(runs("default"))["tiers"]["gpu0.hbm"]["peak_allocated_bytes"]
    b_name, b_div = ms.bytes_unit(peak)
    assert ax.get_ylabel() == f"memory ({b_name})"
    assert peak / b_div <= ax.get_ylim()[1] <= 1.2 * peak / b_div
    assert not any(line.get_label().startswith("capacity") for line in ax.get_lines())
    assert "off the scale" in ax.get_title()
    # Under vdnn at 4 GiB the curve reaches the capacity: the line is drawn, the axis holds it.
    plot_memory.main([str(runs("swap"))])
    ax = figures[-1].axes[0]
    assert any(line.get_label().startswith("capacity 4 GiB") for line in ax.get_lines())
    assert ax.get_ylim()[1] >= 4
    # --capacity draws it anyway.
    plot_memory.main([str(runs("default")), "--capacity"])
    ax = figures[-1].axes[0]
    assert ax.get_ylim()[1] >= 40 * 2**30 / ms.bytes_unit(40 * 2**30)[1]


def test_memory_plot_function_scales_several_runs(runs, figures):
    plot_memory.plot([runs("default"), runs("keep_all")])
    top = figures[-1].axes[0]
    highest = max(ms.read_summary(runs(r))["tiers"]["gpu0.hbm"]["peak_allocated_bytes"] for r in ("default", "keep_all"))
    _, b_div = ms.bytes_unit(highest)
    assert top.get_ylim()[1] <= 1.2 * highest / b_div


def test_compare_text_fits_100_columns(runs):
    dirs = [runs(r) for r in ("default", "keep_all", "swap", "caching", "oom")]
    values = compare.compare_values(dirs)
    text = compare.as_text(compare.compare_table(values))
    widest = max(len(line) for line in text.splitlines())
    assert widest <= 100, f"{widest} columns"
    # Every value is still there: the runs come in blocks, each with the row names.
    for label in values.index:  # a long label wraps onto a second header line
        assert all(word in text for word in label.split()), label
    assert text.count("peak allocated") >= 2
    for peak in values["peak_allocated_bytes"]:
        assert ms.format_bytes(peak) in text
