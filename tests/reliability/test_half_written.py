"""Case 2 of the reliability pass: a save that dies half-way (a full disk here; a kill -9 leaves
the same truncated file) must not become the newest version of a kedro-datasets output."""

from __future__ import annotations

import errno

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
from kedro.io.core import Version  # noqa: E402
from kedro_datasets.pandas import CSVDataset as PlainCSVDataset  # noqa: E402

from bert_mlm.datasets.atomic import (  # noqa: E402
    CSVDataset,
    JSONDataset,
    MatplotlibDataset,
    PlotlyJSONDataset,
    TextDataset,
)


class HalfThenDiskFull:
    """A file object that writes the first half of what it is given, then fails as a full disk does."""

    def __init__(self, handle):
        self.handle = handle

    def write(self, data):
        self.handle.write(data[: max(1, len(data) // 2)])
        self.handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()
        return False

    def __getattr__(self, name):
        return getattr(self.handle, name)


def fill_the_disk(dataset, monkeypatch):
    real_open = dataset._fs.open
    monkeypatch.setattr(dataset._fs, "open", lambda path, *a, **k: HalfThenDiskFull(real_open(path, *a, **k)))


def figure(value: float):
    fig, axis = plt.subplots()
    axis.plot([0, value])
    return fig


CASES = {
    "csv": (CSVDataset, "stats.csv", pd.DataFrame({"a": range(1000)}), pd.DataFrame({"a": range(2000)})),
    "json": (JSONDataset, "metrics.json", {"loss": 1.0}, {"loss": 2.0, "pad": "x" * 10_000}),
    "text": (TextDataset, "report.html", "first", "second " * 1000),
    "plotly": (
        PlotlyJSONDataset,
        "plot.json",
        go.Figure(go.Scatter(y=[1, 2])),
        go.Figure(go.Scatter(y=list(range(500)))),
    ),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_half_written_save_is_never_the_newest_version(tmp_path, monkeypatch, kind):
    dataset_type, name, first, second = CASES[kind]
    path = str(tmp_path / name)
    dataset_type(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(first)
    failing = dataset_type(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z"))
    fill_the_disk(failing, monkeypatch)
    with pytest.raises(Exception, match="No space left"):
        failing.save(second)
    monkeypatch.undo()
    latest = dataset_type(filepath=path, version=Version(None, None))
    loaded = latest.load()
    if kind == "csv":
        pd.testing.assert_frame_equal(loaded, first)
    elif kind == "plotly":
        assert list(loaded.data[0].y) == [1, 2]
    else:
        assert loaded == first
    # Nothing half-written is left behind under the final name, nor as a stray temporary.
    assert [p.name for p in (tmp_path / name / "2026-01-02T00.00.00.000Z").iterdir()] == []


def test_without_the_wrapper_kedro_datasets_leaves_a_truncated_newest_version(tmp_path, monkeypatch):
    """The failure this module exists for (if kedro-datasets fixes it, the wrapper can go)."""
    path = str(tmp_path / "stats.csv")
    PlainCSVDataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(
        pd.DataFrame({"a": range(1000)})
    )
    failing = PlainCSVDataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z"))
    fill_the_disk(failing, monkeypatch)
    with pytest.raises(Exception, match="No space left"):
        failing.save(pd.DataFrame({"a": range(2000)}))
    monkeypatch.undo()
    assert len(PlainCSVDataset(filepath=path, version=Version(None, None)).load()) < 1000


def test_figures_are_saved_atomically_too(tmp_path, monkeypatch):
    path = str(tmp_path / "curves.png")
    MatplotlibDataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(figure(1.0))
    failing = MatplotlibDataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z"))
    fill_the_disk(failing, monkeypatch)
    with pytest.raises(Exception, match="No space left"):
        failing.save(figure(2.0))
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "curves.png" / "2026-01-02T00.00.00.000Z").iterdir()] == []
    assert (tmp_path / "curves.png" / "2026-01-01T00.00.00.000Z" / "curves.png").stat().st_size > 1000
    # A dict of figures (a folder) also appears only complete.
    folder = MatplotlibDataset(filepath=str(tmp_path / "panels"), version=Version(None, "2026-01-03T00.00.00.000Z"))
    folder.save({"a.png": figure(1.0), "b.png": figure(2.0)})
    assert sorted(p.name for p in (tmp_path / "panels" / "2026-01-03T00.00.00.000Z" / "panels").iterdir()) == [
        "a.png",
        "b.png",
    ]
