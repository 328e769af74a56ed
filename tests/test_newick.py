"""aam.unifrac.newick: the lean reader reads trees as scikit-bio's newick reader does."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import skbio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aam.unifrac.newick import NewickError, parse_newick

DATA = Path(__file__).resolve().parents[1] / "data"


def skbio_view(text: str) -> tuple[list[int], list[float | None], list[str | None]]:
    """(parent, length, name) of every node in postorder, as scikit-bio reads ``text``."""
    return view(skbio.TreeNode.read(io.StringIO(text), format="newick", verify=False))


def assert_same_as_skbio(text: str) -> None:
    ours = parse_newick(text)
    parent, length, name = skbio_view(text)
    assert ours.parent.tolist() == parent
    assert ours.name == name
    np.testing.assert_array_equal(
        np.array([np.nan if x is None else x for x in ours.length]),
        np.array([np.nan if x is None else x for x in length]),
    )


HAND_WRITTEN = [
    "(A:1,B:2)r:3;",
    "('a b':1,c_d:2);",
    "(a[comment]:1,'it''s':2);",
    "((A,B),(C));",
    "(,);",
    "((A:1,B:1e-3)0.95:2,C)  ;\n",
    "(A:1 ,  B : 2 );",
    "((A,B));",
    "(A,B);(C,D);",
    "((A:0,B:1):0,(C:1,D:1):2);",
    "((A:1,B:-2):1,(C:1,D:1):2):-1;",
    "((A:1,B:1)x:inf,(C:1,D:1):nan);",
    "(('x,y':1,'(z)':2)'in ner':3,'q''s':4);",
]


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_hand_written_trees(text):
    assert_same_as_skbio(text)


@pytest.mark.parametrize("study", ["demo", "oral"])
def test_real_trees(study):
    assert_same_as_skbio((DATA / study / "tree.nwk").read_text())


@pytest.mark.parametrize(
    "text, reason",
    [
        ("(A,B)", "no ';'"),
        ("((A:1,B:2);", "not closed"),
        ("(A,B));", "unbalanced"),
        ("(A:x,B);", "not a number"),
        ("(A:,B);", "without one branch length"),
        ("(A,B)C D;", "unexpected label"),
        ("('A,B);", "unclosed quote"),
        ("(A[x,B);", "unclosed quote or comment"),
        ("A,B;", "outside parentheses"),
        ("(A,B)(C,D);", "after a complete node"),
    ],
)
def test_not_newick(text, reason):
    with pytest.raises(NewickError, match=reason.replace("(", r"\(")):
        parse_newick(text)


NAMES = st.one_of(
    st.none(),
    # scikit-bio writes other whitespace unquoted, and then cannot read it back as a label
    st.text(st.characters(exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")) | st.just(" ")).filter(
        lambda text: 1 <= len(text) <= 6
    ),
    st.sampled_from(["A_1", "x y", "it's", "(a)", "a,b", "[c]", "0.95", "_"]),
)
LENGTHS = st.one_of(st.none(), st.floats(0, 1e6), st.sampled_from([0.0, 1e-300, 5e-324, 1e308]))


@st.composite
def trees(draw, depth: int = 0) -> skbio.TreeNode:
    node = skbio.TreeNode(name=draw(NAMES), length=draw(LENGTHS))
    if depth < 4 and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            node.append(draw(trees(depth + 1)))
    return node


def view(tree: skbio.TreeNode) -> tuple[list[int], list[float | None], list[str | None]]:
    """(parent, length, name) of every node of ``tree`` in postorder."""
    nodes = list(tree.postorder(include_self=True))
    position = {id(node): k for k, node in enumerate(nodes)}
    parent = [-1 if n.parent is None else position[id(n.parent)] for n in nodes]
    return parent, [n.length for n in nodes], [n.name for n in nodes]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees())
@example(tree=skbio.TreeNode(name="')"))  # written ''')': a bare '' was read before it
def test_what_skbio_writes_reads_back_as_written(tree):
    """The tree scikit-bio wrote comes back; so does scikit-bio's reading of it where that
    is right (it cannot read some labels it writes, e.g. ':')."""
    text = io.StringIO()
    tree.write(text, format="newick")
    ours = parse_newick(text.getvalue())
    parent, length, name = view(tree)
    assert (ours.parent.tolist(), ours.length, ours.name) == (parent, length, name)
