"""Reads below every tree node, per sample: the input all UniFrac kernels share."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from aam.data.reconcile import preview
from aam.errors import InputError
from aam.unifrac.tree import TreeArrays

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeAbundance:
    """Per-node relative abundances of the nodes that can contribute to a distance.

    Only nodes with a positive branch length are kept (a node without reads has no entries).
    ``proportions[v, i]`` is the fraction of sample ``i``'s reads that lie below node ``v``.
    """

    sample_ids: list[str]
    lengths: np.ndarray  # (n_nodes,) float64
    proportions: sp.csr_matrix  # (n_nodes, n_samples), sorted indices


def node_abundance(
    counts: sp.spmatrix,
    observation_ids: Sequence[str],
    sample_ids: Sequence[str],
    tree: TreeArrays,
    *,
    prune_missing: bool = False,
    table_name: str = "table",
    tree_name: str = "tree",
) -> NodeAbundance:
    """Accumulate an ASV x sample count matrix up the tree.

    ASVs are matched to tips by name only (internal-node labels are never matched). ASVs not
    in the tree are an error unless ``prune_missing``, which drops them and logs the fraction
    of reads dropped. Samples without reads are an error naming them.
    """
    counts = sp.csr_matrix(counts, dtype=np.float64)
    tips = match_tips(observation_ids, tree, prune_missing, table_name, tree_name, counts=counts)
    keep = tips >= 0
    if not keep.all():
        counts, tips = counts[keep], tips[keep]
    totals = check_samples_have_reads(counts, sample_ids, table_name)
    # Reads below each node with a length, turned into proportions in place: no copies.
    # Nodes without reads keep an empty row, which no kernel visits.
    keep_nodes = tree.length > 0
    proportions = sp.csr_matrix(ancestor_matrix(tree.parent, tips)[keep_nodes] @ counts)
    proportions.data *= (1.0 / totals)[proportions.indices]
    proportions.sort_indices()
    return NodeAbundance(
        sample_ids=[str(sid) for sid in sample_ids],
        lengths=tree.length[keep_nodes].copy(),
        proportions=proportions,
    )


def match_tips(
    observation_ids: Sequence[str],
    tree: TreeArrays,
    prune_missing: bool,
    table_name: str = "table",
    tree_name: str = "tree",
    counts: sp.spmatrix | None = None,
) -> np.ndarray:
    """Tip node index of each ASV (-1 for ASVs dropped by ``prune_missing``).

    Dropped ASVs are logged, with the fraction of reads they hold when ``counts`` (ASV x
    sample) is given.
    """
    tips = np.array([tree.tip_index.get(str(asv), -1) for asv in observation_ids], dtype=np.int64)
    missing = [str(asv) for asv, tip in zip(observation_ids, tips, strict=True) if tip < 0]
    if missing and not prune_missing:
        raise InputError(
            f"{table_name}: {len(missing)} of {len(tips)} ASVs are not tips of {tree_name} "
            f"(e.g. {preview(missing, 2)}); use a tree built from this table or pass "
            "--prune-missing to drop them"
        )
    if missing:
        share = ""
        if counts is not None:
            reads = np.asarray(counts.sum(axis=1), dtype=np.float64).ravel()
            share = f"; they held {reads[tips < 0].sum() / max(reads.sum(), 1):.2%} of the reads"
        log.warning(
            "%s: dropped %d of %d ASVs that are not tips of %s (e.g. %s)%s",
            table_name,
            len(missing),
            len(tips),
            tree_name,
            preview(missing, 2),
            share,
        )
    return tips


def check_samples_have_reads(
    counts: sp.spmatrix, sample_ids: Sequence[str], table_name: str = "table"
) -> np.ndarray:
    """Reads per sample; an error naming the samples that have none (a total below the
    smallest normal float64 counts as none: its reciprocal would overflow)."""
    totals = np.asarray(counts.sum(axis=0)).ravel()
    least = np.finfo(np.float64).tiny
    empty = [str(sid) for sid, total in zip(sample_ids, totals, strict=True) if total < least]
    if empty:
        raise InputError(
            f"{table_name}: {len(empty)} samples have no reads (e.g. {preview(empty, 3)}); "
            "remove them (or rarefy, which drops them) before computing UniFrac"
        )
    return totals


def ancestor_matrix(parent: np.ndarray, tips: np.ndarray) -> sp.csr_matrix:
    """Sparse (nodes x ASVs) indicator: entry (v, k) is 1 when node v is on ASV k's root path."""
    rows, cols = [], []
    node, column = tips, np.arange(len(tips))
    while len(node):
        rows.append(node)
        cols.append(column)
        up = parent[node]
        alive = up >= 0
        node, column = up[alive], column[alive]
    rows_all, cols_all = np.concatenate(rows), np.concatenate(cols)
    data = np.ones(len(rows_all), dtype=np.float64)
    return sp.csr_matrix((data, (rows_all, cols_all)), shape=(len(parent), len(tips)))
