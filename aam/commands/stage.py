"""`aam stage`: copy inputs into the work area, verified, with a sha256 manifest
(``aam.runtime.staging``). QIIME 2 artifacts (.qza) are staged as their plain files, and a
table whose feature IDs are not sequences (QIIME 2's md5 hashes) as one whose IDs are, from
``--sequences``: every later job reads plain BIOM, newick and TSV."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from aam.data.qiime2 import is_artifact, read_artifact, read_text
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option
from aam.runtime.staging import stage_files

KINDS = ("file", "tree", "table", "taxonomy")  # the flags of NAME=PATH, in staging order


@dataclass
class StageOptions:
    """The options of `aam stage`; a malformed NAME=PATH and a call that stages nothing (or
    relabels nothing) are refused here."""

    output_dir: Path = option(None, "work area the files are copied to", required=True)
    manifest: str = option("manifest.sha256", "manifest file name")
    file: list[str] = option(
        [], "copy PATH to OUTPUT_DIR/NAME (repeat)", repeat=True, metavar="NAME=PATH"
    )
    tree: list[str] = option(
        [],
        "like --file, for a newick tree or a QIIME 2 rooted-tree.qza: checked first (readable, "
        "named unique tips, branch lengths), so a bad tree stops here, named by PATH, before "
        "any job reads it",
        repeat=True,
        metavar="NAME=PATH",
    )
    table: list[str] = option(
        [],
        "like --file, for a BIOM table or a QIIME 2 table.qza (staged as BIOM)",
        repeat=True,
        metavar="NAME=PATH",
    )
    sequences: Path | None = option(
        None,
        "FASTA or QIIME 2 rep-seqs.qza of the feature IDs of --table and --tree: they are "
        "staged with each ID replaced by its sequence (for QIIME 2's md5 feature IDs)",
    )
    taxonomy: list[str] = option(
        [],
        "like --file, for a QIIME 2 taxonomy TSV or taxonomy.qza (staged as TSV)",
        repeat=True,
        metavar="NAME=PATH",
    )

    def __post_init__(self) -> None:
        check_options(self)
        named = self.named()
        if not any(named.values()):
            raise InputError(
                "nothing to stage; give --file, --tree, --table or --taxonomy NAME=PATH"
            )
        if self.sequences and len(named["table"]) + len(named["tree"]) == 0:
            raise InputError(
                "--sequences relabels a table's and a tree's IDs; give --table or --tree"
            )

    def named(self) -> dict[str, dict[str, Path]]:
        """NAME -> PATH of every --file, --tree, --table and --taxonomy, by flag."""
        return {kind: _named(getattr(self, kind), f"--{kind}") for kind in KINDS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam stage`."""
    add_options(parser, StageOptions)


def run(args: argparse.Namespace) -> None:
    """Check every --tree, then stage every --file, --tree, --table and --taxonomy (artifacts
    as their plain files, a table with --sequences relabelled) and write the manifest
    (default OUTPUT_DIR/manifest.sha256)."""
    opts = from_args(StageOptions, args)
    named = opts.named()
    for path in named["file"].values():
        if is_artifact(path):
            raise InputError(
                f"{path}: a QIIME 2 artifact where a plain file is expected; give the exported "
                "file (qiime tools export)"
            )
    if named["tree"]:
        from aam.unifrac.tree import check_tree

        for path in named["tree"].values():
            check_tree(path)
    writers: dict[str, Callable[[Path], None]] = {}
    for name, path in named["table"].items():
        if opts.sequences or is_artifact(path):
            writers[name] = partial(_write_table, path, opts.sequences)
    for name, path in named["tree"].items():
        if opts.sequences:
            writers[name] = partial(_write_tree, path, opts.sequences)
        elif is_artifact(path):
            writers[name] = partial(_write_payload, path, "tree")
    for name, path in named["taxonomy"].items():
        if is_artifact(path):
            writers[name] = partial(_write_payload, path, "taxonomy")
    files = {name: path for paths in named.values() for name, path in paths.items()}
    stage_files(opts.output_dir, files, opts.manifest, writers)


def _write_table(path: Path, sequences: Path | None, target: Path) -> None:
    """Write table ``path`` to ``target`` as BIOM HDF5, its IDs replaced by ``sequences``."""
    if sequences is None:
        _write_payload(path, "table", target)
        return
    import biom

    from aam.data.feature_sequences import read_sequences, with_sequences
    from aam.data.table import load_table

    table = with_sequences(load_table(path), read_sequences(sequences), path, sequences)
    with biom.util.biom_open(str(target), "w") as handle:
        table.to_hdf5(handle, "aam stage")


def _write_tree(path: Path, sequences: Path, target: Path) -> None:
    """Write tree ``path`` to ``target`` as newick, each tip named by a feature ID of
    ``sequences`` renamed to its sequence (other tips, e.g. a reference's, kept)."""
    import skbio

    from aam.data.feature_sequences import read_sequences

    tree = skbio.TreeNode.read(io.StringIO(read_text(path, "tree")), format="newick")
    mapping = read_sequences(sequences)
    tips = [tip for tip in tree.tips() if tip.name in mapping]
    if not tips:
        raise InputError(
            f"{path}: no tip is a feature ID of {sequences}; give the tree of this table's "
            "features (QIIME 2: rooted-tree.qza)"
        )
    for tip in tips:
        tip.name = mapping[tip.name]
    tree.write(str(target), format="newick")


def _write_payload(path: Path, kind: str, target: Path) -> None:
    """Write the plain file inside artifact ``path`` (of ``kind``) to ``target``."""
    target.write_bytes(read_artifact(path, kind))


def _named(items: list[str], flag: str) -> dict[str, Path]:
    """NAME -> PATH of ``flag NAME=PATH`` arguments."""
    files = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or "/" in name:
            raise InputError(f"{flag} {item}: expected NAME=PATH with a plain file NAME")
        files[name] = Path(path)
    return files
