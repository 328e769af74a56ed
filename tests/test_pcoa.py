"""`aam pcoa`: the PCoA of a UniFrac matrix and the files QIIME 2 imports."""

import numpy as np
import pandas as pd
import skbio
from test_cli_training import aam, assert_failed

from aam.unifrac.io import write_distance_matrix


def points_matrix(tmp_path, n: int = 12):
    """A Euclidean matrix of points in 2 clusters along one axis: PC1 separates them."""
    rng = np.random.default_rng(0)
    points = rng.normal(scale=0.1, size=(n, 3))
    points[: n // 2, 0] += 2.0
    matrix = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    ids = [f"s{k}" for k in range(n)]
    path = tmp_path / "m.h5"
    write_distance_matrix(path, ids, matrix)
    metadata = tmp_path / "meta.tsv"
    labels = ["a"] * (n // 2) + ["b"] * (n - n // 2)
    pd.DataFrame({"sample_id": ids, "site": labels}).to_csv(metadata, sep="\t", index=False)
    return path, metadata, ids, matrix


def test_pcoa_writes_the_plot_an_ordination_and_the_lsmat(tmp_path):
    path, metadata, ids, matrix = points_matrix(tmp_path)
    out = tmp_path / "out"
    args = ["--matrix", path, "--metadata", metadata, "--color-column", "site"]
    assert aam("pcoa", *args, "--output-dir", out) == 0
    assert (out / "pcoa.png").read_bytes()[:4] == b"\x89PNG"
    lsmat = skbio.DistanceMatrix.read(str(out / "distance-matrix.tsv"), format="lsmat")
    assert list(lsmat.ids) == ids and np.allclose(lsmat.data, matrix)
    result = skbio.OrdinationResults.read(str(out / "ordination.txt"), format="ordination")
    assert list(result.samples.index) == ids and result.samples.shape[1] == 10
    first = result.samples.iloc[:, 0].to_numpy()
    assert (np.sign(first[:6]) != np.sign(first[6:]).reshape(-1, 1)).all()  # PC1 splits them
    assert result.proportion_explained.iloc[0] > 0.9


def test_pcoa_refuses_bad_input_leaving_nothing(tmp_path, capsys):
    path, metadata, _, _ = points_matrix(tmp_path)
    out = tmp_path / "out"
    rc = aam("pcoa", "--matrix", path, "--metadata", metadata, "--output-dir", out)
    assert_failed(rc, capsys, "pcoa", out, "--metadata and --color-column")
    args = ["--matrix", path, "--metadata", metadata, "--color-column", "study"]
    rc = aam("pcoa", *args, "--output-dir", out)
    assert_failed(rc, capsys, "pcoa", out, str(metadata), "no column 'study'")
    small = tmp_path / "small.h5"
    write_distance_matrix(small, ["a", "b"], np.array([[0.0, 1.0], [1.0, 0.0]]))
    rc = aam("pcoa", "--matrix", small, "--output-dir", out)
    assert_failed(rc, capsys, "pcoa", out, "2 samples", "at least 3")
    assert not out.exists()
