"""Phylogeny loading and validation, and its flat (postorder array) form for the engines."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from aam.data.qiime2 import read_text
from aam.data.reconcile import preview, printable
from aam.errors import InputError
from aam.unifrac.newick import NewickError, ParsedTree, parse_newick

if TYPE_CHECKING:
    import skbio


@dataclass(frozen=True)
class TreeArrays:
    """A rooted tree as postorder arrays: node ``k``'s parent is ``parent[k]`` (-1 for the root)."""

    parent: np.ndarray  # int64, postorder, root last
    length: np.ndarray  # float64 branch length above each node; a missing length is 0
    tip_index: dict[str, int]  # tip name -> node index; internal-node labels are never included


def load_tree(path: str | Path, *, midpoint_root: bool = False) -> TreeArrays:
    """Read a newick tree (or a QIIME 2 rooted-tree.qza), check it can be used for UniFrac,
    optionally midpoint-root it.

    Every branch but the root's needs a finite length >= 0 (see ``_check_branch_lengths``).
    A root with three or more children (as FastTree writes) is taken as unrooted: UniFrac
    needs a root, so that is an error unless ``midpoint_root`` is set (scikit-bio roots it).
    """
    path = Path(path)
    tree, is_tip = _read_checked(path)
    root_children = int(np.count_nonzero(tree.parent == len(tree.parent) - 1))
    if root_children > 2:
        if not midpoint_root:
            raise InputError(
                f"{path}: the tree is unrooted (its root has {root_children} children); "
                "pass --midpoint-root to root it at its midpoint, or root it yourself"
            )
        return tree_arrays(_midpoint_rooted(tree))
    length = np.array([0.0 if x is None else x for x in tree.length], dtype=np.float64)
    tip_index = {tree.name[k]: int(k) for k in np.flatnonzero(is_tip)}
    return TreeArrays(parent=tree.parent, length=length, tip_index=tip_index)


def check_tree(path: str | Path) -> None:
    """InputError naming ``path`` unless it is a newick tree UniFrac can use: readable, named
    unique tips, finite branch lengths >= 0 (rooting is left to ``load_tree``: it depends on
    ``--midpoint-root``). `aam stage` runs it on a tree before any job reads the tree."""
    _read_checked(Path(path))


def _read_checked(path: Path) -> tuple[ParsedTree, np.ndarray]:
    """The parsed tree and its tip mask, after the checks of ``check_tree``."""
    if not path.is_file():
        raise InputError(f"{path}: tree file not found; pass an existing newick file with --tree")
    try:
        tree = parse_newick(read_text(path, "tree"))
    except (NewickError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not a readable newick tree ({err}); check the file") from err
    is_tip = np.ones(len(tree.parent), dtype=bool)
    is_tip[tree.parent[tree.parent >= 0]] = False
    is_tip[-1] = False  # a lone root is not a tip (as in scikit-bio)
    tips = [tree.name[k] for k in np.flatnonzero(is_tip)]
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
    _check_branch_lengths(tree, is_tip, path)
    return tree, is_tip


def _midpoint_rooted(tree: ParsedTree) -> skbio.TreeNode:
    """``tree`` rooted at its midpoint by scikit-bio (imported only here: 2-5 s)."""
    import skbio

    nodes = [skbio.TreeNode(name=n, length=x) for n, x in zip(tree.name, tree.length, strict=True)]
    for k, up in enumerate(tree.parent[:-1]):
        nodes[up].append(nodes[k])
    rooted = nodes[-1].root_at_midpoint()
    if len(rooted.children) > 2:
        # The midpoint is an existing node (with 3+ neighbours): keep the root there, and
        # bifurcate it with a zero-length branch (no distance changes) so engines accept it.
        inner = skbio.TreeNode(length=0.0)
        inner.extend(rooted.children[1:])
        rooted.append(inner)
    return rooted


def _check_branch_lengths(tree: ParsedTree, is_tip: np.ndarray, name: str | Path) -> None:
    """Every branch but the root's has a finite length >= 0 (the root's may be missing);
    otherwise InputError naming one offending node (the first in postorder). Part of
    ``load_tree``, so every engine gets the same rule."""
    root = len(tree.length) - 1
    bad = [
        k
        for k, length in enumerate(tree.length)
        if not (k == root and length is None) and not _usable(length)
    ]
    if bad:
        k = bad[0]
        what = "no length" if tree.length[k] is None else f"length {tree.length[k]}"
        if k == root:
            where = "the root"
        elif is_tip[k]:
            where = f"tip {printable(tree.name[k])}"
        else:
            label = tree.name[k]
            where = "an internal node" if label is None else f"internal node {printable(label)}"
        raise InputError(
            f"{name}: {len(bad)} branch(es) lack a finite length >= 0 (e.g. {what} above "
            f"{where}); rebuild the tree with branch lengths (e.g. with `aam tree`) "
            "or set the bad ones to 0"
        )


def tree_arrays(tree: skbio.TreeNode) -> TreeArrays:
    """Flatten a scikit-bio tree into postorder parent/length arrays and a tip-name index
    (a missing length counts as 0)."""
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


def to_skbio(tree: TreeArrays) -> skbio.TreeNode:
    """``tree`` as a scikit-bio tree (tips named, internal nodes unnamed), for the engines
    that need one."""
    import skbio

    names = {k: name for name, k in tree.tip_index.items()}
    nodes = [skbio.TreeNode(name=names.get(k), length=float(x)) for k, x in enumerate(tree.length)]
    for k, up in enumerate(tree.parent):
        if up >= 0:
            nodes[up].append(nodes[k])
    return nodes[-1]


def as_tree_arrays(tree: TreeArrays | skbio.TreeNode) -> TreeArrays:
    """``tree`` as ``TreeArrays`` (a scikit-bio tree is flattened)."""
    return tree if isinstance(tree, TreeArrays) else tree_arrays(tree)


def _usable(length: float | None) -> bool:
    """Whether ``length`` is a finite number >= 0."""
    return length is not None and math.isfinite(length) and length >= 0
