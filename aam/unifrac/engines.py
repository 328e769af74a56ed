"""UniFrac engines: our built-in kernels, Striped UniFrac (``unifrac``), scikit-bio (reference)."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aam.data.table import Counts, check_counts, counts_of
from aam.errors import InputError
from aam.runtime.external_tools import record_package
from aam.runtime.threads import usable_threads
from aam.unifrac.abundance import check_samples_have_reads, match_tips, node_abundance
from aam.unifrac.metrics import distance_matrix
from aam.unifrac.pair_sums import DEFAULT_ALPHA, METRICS, SUM_FOR_METRIC
from aam.unifrac.tree import TreeArrays, as_tree_arrays, to_skbio

if TYPE_CHECKING:
    import biom
    import skbio

log = logging.getLogger(__name__)

ENGINES = ("builtin", "unifrac", "skbio")
SKBIO_METRICS = {
    "unweighted": ("unweighted_unifrac", {}),
    "weighted_normalized": ("weighted_unifrac", {"normalized": True}),
    "weighted_unnormalized": ("weighted_unifrac", {"normalized": False}),
}


def compute_unifrac(
    table: Counts | biom.Table,
    tree: TreeArrays | skbio.TreeNode,
    metrics: list[str],
    *,
    alpha: float = DEFAULT_ALPHA,
    engine: str = "builtin",
    device: str = "cpu",
    dtype: type = np.float64,
    threads: int | None = None,
    prune_missing: bool = False,
    progress: bool = False,
    table_name: str = "table",
    tree_name: str = "tree",
) -> dict[str, np.ndarray]:
    """Distance matrices (samples in ``table.ids()`` order) for each metric in ``metrics``.

    ``table`` and ``tree`` are what ``aam.data.table.load_counts`` and
    ``aam.unifrac.tree.load_tree`` return, or a biom Table and a scikit-bio tree. The tree must
    be rooted, with usable branch lengths (``load_tree`` checks both; a missing length counts
    as 0 here). All engines share the same input checks: counts finite and >= 0, ASVs missing
    from the tree, samples without reads, and a total branch length that fits ``dtype``.
    """
    counts = counts_of(table)
    arrays = checked_tree_arrays(counts, tree, metrics, alpha, dtype, table_name, tree_name)
    ids = counts.sample_ids
    if engine == "builtin":
        abundance = node_abundance(
            counts.matrix,
            counts.observation_ids,
            ids,
            arrays,
            prune_missing=prune_missing,
            table_name=table_name,
            tree_name=tree_name,
        )
        kinds = {SUM_FOR_METRIC[m] for m in metrics}
        sums = _pair_sums(abundance, kinds, alpha, dtype, device, threads, progress)
        last_use = {SUM_FOR_METRIC[m]: m for m in metrics}  # then its sum may be overwritten
        return {
            m: distance_matrix(m, abundance, sums, alpha, reuse=last_use[SUM_FOR_METRIC[m]] == m)
            for m in metrics
        }
    tips = match_tips(
        counts.observation_ids,
        arrays,
        prune_missing,
        table_name,
        tree_name,
        counts=counts.matrix,
    )
    keep = tips >= 0
    check_samples_have_reads(counts.matrix[keep], ids, table_name)
    table = _biom_table(counts, keep)
    tree = to_skbio(arrays)
    if engine == "skbio":
        try:
            return {m: _skbio(table, tree, m).astype(dtype) for m in metrics}
        except ValueError as err:  # skbio's own checks, e.g. branches without a length
            raise InputError(
                f"{tree_name}: scikit-bio rejects this input ({str(err).splitlines()[0]}); "
                "use --engine builtin"
            ) from err
    if engine == "unifrac":
        return {m: _striped(table, tree, m, alpha, dtype, threads).astype(dtype) for m in metrics}
    raise InputError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


def checked_tree_arrays(
    table: Counts,
    tree: TreeArrays | skbio.TreeNode,
    metrics: list[str],
    alpha: float,
    dtype: type,
    table_name: str = "table",
    tree_name: str = "tree",
) -> TreeArrays:
    """The checks every engine shares (alpha, metric names, counts finite and >= 0, a total
    branch length that fits ``dtype``); returns the tree's arrays."""
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"--alpha {alpha}: generalized UniFrac needs 0 <= alpha <= 1")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise InputError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    check_counts(table, table_name)
    arrays = as_tree_arrays(tree)
    _check_total_length(arrays.length, dtype, tree_name)
    return arrays


def _check_total_length(lengths: np.ndarray, dtype: type, tree_name: str) -> None:
    """A pair of samples sums at most twice the tree's length: that must fit in ``dtype``."""
    with np.errstate(over="ignore"):
        total = float(lengths.sum())
    if not 4 * total < float(np.finfo(dtype).max):
        raise InputError(
            f"{tree_name}: the branch lengths sum to {total:.3g}, too much for {np.dtype(dtype)} "
            "distance sums; rescale the tree (divide every length by a constant)"
        )


def _biom_table(counts: Counts, keep: np.ndarray) -> biom.Table:
    """The observations ``keep`` of ``counts`` as a biom Table (for the other engines)."""
    import biom

    return biom.Table(
        counts.matrix[keep],
        [x for x, k in zip(counts.observation_ids, keep, strict=True) if k],
        counts.sample_ids,
    )


def _pair_sums(abundance, kinds, alpha, dtype, device, threads, progress):
    """Sparse numba kernel on the CPU; dense torch kernel on a GPU."""
    if device == "cpu":
        from aam.unifrac.cpu_kernel import pair_sums_cpu

        return pair_sums_cpu(
            abundance.proportions,
            abundance.lengths,
            kinds,
            alpha=alpha,
            dtype=dtype,
            threads=threads,
            progress=progress,
        )
    import torch

    from aam.unifrac.torch_kernel import pair_sums_torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device {device}: torch sees no GPU here; use --device cpu")
    return pair_sums_torch(
        abundance.proportions,
        abundance.lengths,
        kinds,
        alpha=alpha,
        dtype=dtype,
        device=device,
        progress=progress,
    )


def _skbio(table: biom.Table, tree: skbio.TreeNode, metric: str) -> np.ndarray:
    """scikit-bio's ``beta_diversity`` (the reference implementation)."""
    from skbio.diversity import beta_diversity  # 2-5 s of imports: only for this engine

    if metric not in SKBIO_METRICS:
        raise InputError(
            f"--metric {metric}: scikit-bio lacks this metric; use --engine builtin or unifrac"
        )
    name, kwargs = SKBIO_METRICS[metric]
    counts = table.matrix_data.T.toarray()
    result = beta_diversity(
        name,
        counts,
        ids=list(table.ids()),
        taxa=list(table.ids("observation")),
        tree=tree,
        **kwargs,
    )
    return result.data


def _striped(
    table: biom.Table, tree: skbio.TreeNode, metric: str, alpha: float, dtype, threads
) -> np.ndarray:
    """Striped UniFrac (the ``unifrac`` package, present in the cluster images)."""
    import biom

    try:
        import unifrac
    except ImportError as err:
        raise InputError(
            "--engine unifrac: the Striped UniFrac package `unifrac` is not importable here "
            "(it is in the cluster images; it does not build from PyPI on this machine); "
            "use --engine builtin"
        ) from err
    record_package("striped-unifrac", "unifrac")
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(usable_threads(threads))
    name = metric + ("_fp32" if np.dtype(dtype) == np.float32 else "")
    kwargs = {"alpha": alpha} if metric == "generalized" else {}
    with tempfile.TemporaryDirectory(prefix="aam-unifrac-") as tmp:
        table_path, tree_path = Path(tmp) / "table.biom", Path(tmp) / "tree.nwk"
        with biom.util.biom_open(str(table_path), "w") as handle:
            table.to_hdf5(handle, "aam")
        tree.write(str(tree_path), format="newick")
        result = getattr(unifrac, name)(str(table_path), str(tree_path), **kwargs)
    return result.filter([str(x) for x in table.ids()]).data
