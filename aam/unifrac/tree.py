"""Phylogeny loading and validation, and its flat (postorder array) form for the engines."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import skbio

from aam.data.reconcile import preview, printable
from aam.errors import InputError


@dataclass(frozen=True)
class TreeArrays:
    """A rooted tree as postorder arrays: node ``k``'s parent is ``parent[k]`` (-1 for the root)."""

    parent: np.ndarray  # int64, postorder, root last
    length: np.ndarray  # float64 branch length above each node; a missing length is 0
    tip_index: dict[str, int]  # tip name -> node index; internal-node labels are never included


def load_tree(path: str | Path, *, midpoint_root: bool = False) -> skbio.TreeNode:
    """Read a newick tree, check it can be used for UniFrac, optionally midpoint-root it.

    Every branch but the root's needs a finite length >= 0 (see ``_check_branch_lengths``).
    A root with three or more children (as FastTree writes) is taken as unrooted: UniFrac
    needs a root, so that is an error unless ``midpoint_root`` is set.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: tree file not found; pass an existing newick file with --tree")
    try:
        # verify=False: no format sniffing, whose warning would break the one-line error
        tree = skbio.TreeNode.read(str(path), format="newick", verify=False)
    except Exception as err:  # skbio raises several parser error types
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{path}: not a readable newick tree ({first}); check the file") from err
    tips = [tip.name for tip in tree.tips()]
    if not tips:
        raise InputError(f"{path}: the tree has no tips; pass a tree built from the table's ASVs")
    unnamed = sum(name is None for name in tips)
    if unnamed:
        raise InputError(f"{path}: {unnamed} tips have no name; every tip must be named by its ASV")
    dups = [name for name, n in collections.Counter(tips).items() if n > 1]
    if dups:
        raise InputError(
            f"{path}: {len(dups)} duplicate tip names (e.g. {preview(dups, 3)}); "
            "tip names must be unique ASV IDs"
        )
    _check_branch_lengths(tree, path)
    if len(tree.children) > 2:
        if not midpoint_root:
            raise InputError(
                f"{path}: the tree is unrooted (its root has {len(tree.children)} children); "
                "pass --midpoint-root to root it at its midpoint, or root it yourself"
            )
        tree = tree.root_at_midpoint()
        if len(tree.children) > 2:
            # The midpoint is an existing node (with 3+ neighbours): keep the root there, and
            # bifurcate it with a zero-length branch (no distance changes) so engines accept it.
            inner = skbio.TreeNode(length=0.0)
            inner.extend(tree.children[1:])
            tree.append(inner)
    return tree


def _check_branch_lengths(tree: skbio.TreeNode, name: str | Path) -> None:
    """Every branch but the root's has a finite length >= 0 (the root's may be missing);
    otherwise InputError naming one offending node. Part of ``load_tree``, so every engine
    gets the same rule."""
    bad = [
        node
        for node in tree.postorder(include_self=True)
        if not (node.is_root() and node.length is None) and not _usable(node.length)
    ]
    if bad:
        node = bad[0]
        what = "no length" if node.length is None else f"length {node.length}"
        raise InputError(
            f"{name}: {len(bad)} branch(es) lack a finite length >= 0 (e.g. {what} above "
            f"{_describe(node)}); rebuild the tree with branch lengths (e.g. with `aam tree`) "
            "or set the bad ones to 0"
        )


def tree_arrays(tree: skbio.TreeNode) -> TreeArrays:
    """Flatten ``tree`` into postorder parent/length arrays and a tip-name index."""
    nodes = list(tree.postorder(include_self=True))
    position = {id(node): k for k, node in enumerate(nodes)}
    parent = np.full(len(nodes), -1, dtype=np.int64)
    length = np.zeros(len(nodes), dtype=np.float64)
    tip_index: dict[str, int] = {}
    for k, node in enumerate(nodes):
        if node.parent is not None:
            parent[k] = position[id(node.parent)]
        if node.length is not None:
            length[k] = node.length
        if not node.children:
            tip_index[node.name] = k
    return TreeArrays(parent=parent, length=length, tip_index=tip_index)


def _usable(length: float | None) -> bool:
    """Whether ``length`` is a finite number >= 0."""
    return length is not None and math.isfinite(length) and length >= 0


def _describe(node: skbio.TreeNode) -> str:
    """``tip NAME``, ``the root``, ``internal node NAME`` or ``an internal node``."""
    if node.is_root():
        return "the root"
    if node.is_tip():
        return f"tip {printable(node.name)}"
    return "an internal node" if node.name is None else f"internal node {printable(node.name)}"
