"""Exact UniFrac of any group of samples (a training batch) from their reads and the tree.

The node x ASV ancestor matrix is built once per table; a group's distances then cost one
spread of its reads up the tree (``aam.unifrac.batch_spread``) and the shared-node kernel over
the nodes those reads reach, in the calling thread or on a pool's threads, for all pairs or
one rank's share. The entries equal ``compute_unifrac``'s full matrix (float64: within
rounding, ~1e-15); nothing N x N is built. ``aam.unifrac.batch_device`` computes the same on a
torch device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from aam.data.table import Counts
from aam.errors import InputError
from aam.threads import ThreadPool
from aam.unifrac.abundance import (
    NodeAbundance,
    ancestor_matrix,
    check_samples_have_reads,
    match_tips,
)
from aam.unifrac.engines import checked_tree_arrays
from aam.unifrac.metrics import SUM_FOR_METRIC, sample_totals, upper_distances
from aam.unifrac.tree import TreeArrays


@dataclass(frozen=True)
class BatchUniFrac:
    """One metric's distances between any samples of one table (by table ASV index)."""

    metric: str
    alpha: float
    dtype: type
    ancestors: sp.csc_matrix  # (nodes with a length) x (table ASVs); a pruned ASV's column is 0
    lengths: np.ndarray  # (nodes with a length,) float64
    in_tree: np.ndarray  # (table ASVs,) bool: False for those --prune-missing dropped

    @classmethod
    def for_table(
        cls,
        counts: Counts,
        tree: TreeArrays,
        metric: str,
        *,
        alpha: float,
        dtype: type = np.float64,
        prune_missing: bool = False,
        table_name: str = "table",
        tree_name: str = "tree",
    ) -> BatchUniFrac:
        """Check ``counts`` against ``tree`` as ``aam unifrac`` does (ASVs missing from the tree,
        counts, samples left without reads, a tree length that fits ``dtype``) and index it."""
        arrays = checked_tree_arrays(counts, tree, [metric], alpha, dtype, table_name, tree_name)
        tips = match_tips(
            counts.observation_ids, arrays, prune_missing, table_name, tree_name, counts.matrix
        )
        keep = tips >= 0
        check_samples_have_reads(counts.matrix[keep], counts.sample_ids, table_name)
        with_length = arrays.length > 0
        kept = np.flatnonzero(keep)
        inner = ancestor_matrix(arrays.parent, tips[kept])[with_length].tocoo()
        shape = (inner.shape[0], len(tips))
        ancestors = sp.csc_matrix((inner.data, (inner.row, kept[inner.col])), shape=shape)
        ancestors.sort_indices()
        return cls(metric, alpha, dtype, ancestors, arrays.length[with_length], keep)

    def distances(
        self,
        asv_ptr: np.ndarray,
        asv_idx: np.ndarray,
        reads: np.ndarray,
        *,
        pool: ThreadPool | None = None,
        share: tuple[int, int] = (0, 1),
    ) -> np.ndarray:
        """(B, B) distances of B samples given as CSR rows: sample ``s`` holds table ASVs
        ``asv_idx[asv_ptr[s]:asv_ptr[s + 1]]`` with ``reads`` of the same slice. ``pool``: its
        threads share the kernel. ``share`` = (rank, world): only this rank's share of the
        pairs (both triangles), 0 elsewhere; the shares of all ranks sum to the matrix, bit for
        bit the one of ``share=(0, 1)``."""
        from aam.unifrac.batch_spread import proportions_below  # numba: only when used
        from aam.unifrac.cpu_kernel import batch_pair_sums

        n = len(asv_ptr) - 1
        proportions, used, totals = proportions_below(
            asv_ptr, asv_idx, reads, self.ancestors, self.in_tree, pool
        )
        if not (totals > 0).all():
            raise InputError(
                f"sample {int(np.argmin(totals > 0))} of a batch has no reads on ASVs of the "
                "tree (those dropped by --prune-missing held them all); drop such samples"
            )
        abundance = NodeAbundance([str(k) for k in range(n)], self.lengths[used], proportions)
        sums, plan = batch_pair_sums(
            proportions,
            abundance.lengths,
            SUM_FOR_METRIC[self.metric],
            alpha=self.alpha,
            dtype=self.dtype,
            pool=pool,
            share=share,
        )
        dist = upper_distances(
            self.metric, sample_totals(self.metric, abundance, self.alpha), sums, 0, reuse=True
        )
        if share[1] > 1:
            dist[~plan.covered(n)] = 0
        return dist + dist.T
