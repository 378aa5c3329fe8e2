"""experiments/page_blocks.py's shared pieces of the generated pages: Markdown tables, number
cells, the PNG writer and a page command's exit status (fill: in
tests/test_results_table.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from attnmt.errors import DataError
from experiments import page_blocks as pb


def test_table_aligns_each_column_as_told_and_joins_the_rows() -> None:
    assert pb.table(["a", "b", "c"], "lrl", [["x", "1.50", "y"], ["z", "2", ""]]) == [
        "| a | b | c |",
        "|---|---:|---|",
        "| x | 1.50 | y |",
        "| z | 2 |  |",
    ]
    assert pb.table(["only"], "r") == ["| only |", "|---:|"]


def test_num_formats_a_value_and_a_missing_one_as_a_dash() -> None:
    assert [pb.num(1.234), pb.num(-0.5, "+.3f"), pb.num(2.0, "+.2f"), pb.num(None)] == [
        "1.23",
        "-0.500",
        "+2.00",
        "–",
    ]


def test_save_png_writes_the_figure_into_a_new_folder_at_the_dpi_asked(tmp_path: Path) -> None:
    fig = pb.figure(2.0, 1.0, dpi=50)
    fig.add_subplot(1, 1, 1).plot([0, 1], [1, 0])
    path = pb.save_png(fig, tmp_path / "new" / "f.png", dpi=30)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (60, 30)  # 2 × 1 inches at 30 dpi
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["f.png"]  # no temporary left


def test_report_prints_the_files_written_or_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pb.report(lambda: [tmp_path / "a.md", tmp_path / "b.png"]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'a.md'}\nwrote {tmp_path / 'b.png'}\n"

    def fails() -> list[Path]:
        raise DataError("x.md: no generated part")

    assert pb.report(fails) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: x.md: no generated part\n" and captured.out == ""

    def second_fails() -> Iterator[Path]:  # the files written before the error are named
        yield tmp_path / "a.md"
        raise DataError("b.md: no generated part")

    assert pb.report(second_fails) == 2
    captured = capsys.readouterr()
    assert captured.out == f"wrote {tmp_path / 'a.md'}\n"
    assert captured.err == "error: b.md: no generated part\n"


def test_panel_labels_its_axes_and_takes_its_place_among_n() -> None:
    fig = pb.figure(4.0, 2.0)
    left, right = (pb.panel(fig, 2, k, f"x{k}", f"y{k}", xlim=(0, 5)) for k in (1, 2))
    assert (right.get_xlabel(), right.get_ylabel(), right.get_xlim()) == ("x2", "y2", (0, 5))
    assert left.get_position().x1 < right.get_position().x0  # side by side, left first
    assert all(line.get_visible() for line in left.get_xgridlines())


def test_heatmap_draws_on_one_0_1_scale_with_the_pieces_as_tick_labels() -> None:
    ax = pb.figure(2.0, 2.0).add_subplot(1, 1, 1)
    image = pb.heatmap(ax, [[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]], ["a", "b", "c"], ["x", "y"],
                       "map", "Greys")  # fmt: skip
    assert image.get_clim() == (0.0, 1.0) and image.get_cmap().name == "Greys"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y"]
    assert ax.get_title() == "map"
