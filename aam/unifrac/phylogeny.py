"""`aam tree`: phylogeny of a BIOM table's ASV sequences.

The observation IDs of the table are the ASV sequences. They are written to a FASTA file under
short safe names (``asv0``, ``asv1``, ...), aligned with MAFFT (``--auto``), a tree is inferred
with FastTree (``-nt -gtr``), midpoint-rooted with scikit-bio, and the tips are renamed back to
the sequences. The newick file (and the optional alignment) is written atomically: a failed run
leaves no output behind.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from aam.data.feature_sequences import parse_fasta
from aam.data.outputs import check_output_file
from aam.errors import InputError
from aam.runtime.atomic import atomic_output
from aam.runtime.external_tools import record_tool
from aam.runtime.threads import usable_threads

log = logging.getLogger(__name__)

# IUPAC nucleotide codes (plus U); any case. Gaps are not allowed: ASVs are unaligned.
_NUCLEOTIDES = re.compile(r"[ACGTURYSWKMBDHVN]+", re.IGNORECASE)
_MIN_SEQUENCES = 3  # FastTree's 2-tip tree cannot be midpoint-rooted into a bifurcation.
NEWICK_SUFFIXES = (".nwk", ".newick", ".tre", ".tree")
FASTA_SUFFIXES = (".fasta", ".fa", ".fna", ".aln")
_INSTALL_HINT = (
    "install it with `apt-get install {pkg}` on Debian/Ubuntu, "
    "or `conda install -c bioconda mafft fasttree`"
)


def mafft_command(mafft: str, fasta: str | Path, threads: int = 1) -> list[str]:
    """MAFFT argv; the alignment goes to stdout."""
    return [mafft, "--auto", "--thread", str(threads), "--quiet", str(fasta)]


def fasttree_command(fasttree: str, alignment: str | Path) -> list[str]:
    """FastTree argv for a nucleotide GTR tree; the newick goes to stdout."""
    return [fasttree, "-nt", "-gtr", "-quiet", str(alignment)]


def find_tool(names: Sequence[str], package: str) -> str:
    """Path of the first of ``names`` on PATH, or InputError with the install hint."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise InputError(f"{names[0]} not found on PATH; " + _INSTALL_HINT.format(pkg=package))


def read_sequences(table_path: Path) -> list[str]:
    """The table's observation IDs, checked to be nucleotide sequences."""
    import biom

    if not table_path.is_file():
        raise InputError(f"{table_path}: no such file")
    try:
        table = biom.load_table(str(table_path))
    except Exception as err:  # biom raises many types for malformed files
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{table_path}: cannot read BIOM table: {reason}") from None
    ids = [str(i) for i in table.ids(axis="observation")]
    bad = [i for i in ids if not _NUCLEOTIDES.fullmatch(i)]
    if bad:
        shown = bad[0] if len(bad[0]) <= 60 else bad[0][:57] + "..."
        raise InputError(
            f"{table_path}: observation ID {shown!r} is not a nucleotide sequence "
            f"({len(bad)} of {len(ids)} IDs); the observation IDs must be the ASV sequences "
            "(letters ACGTUN or IUPAC codes)"
        )
    if len(ids) < _MIN_SEQUENCES:
        raise InputError(
            f"{table_path}: {len(ids)} observation(s); a tree needs at least "
            f"{_MIN_SEQUENCES} ASV sequences"
        )
    return ids


def write_fasta(sequences: Sequence[str], path: Path) -> list[str]:
    """Write ``sequences`` under the names asv0, asv1, ...; return the names."""
    names = [f"asv{i}" for i in range(len(sequences))]
    with open(path, "w") as handle:
        for name, seq in zip(names, sequences, strict=True):
            handle.write(f">{name}\n{seq}\n")
    return names


def run_tool(tool: str, argv: list[str], stdout_path: Path) -> None:
    """Run ``argv`` with stdout to ``stdout_path``; a failure is one-line InputError."""
    log.info("running: %s", " ".join(argv))
    with open(stdout_path, "wb") as out:
        try:
            subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, check=True)
        except FileNotFoundError:
            raise InputError(
                f"{tool} not found ({argv[0]}); " + _INSTALL_HINT.format(pkg=tool.lower())
            ) from None
        except subprocess.CalledProcessError as err:
            lines = [ln.strip() for ln in err.stderr.decode(errors="replace").splitlines()]
            lines = [ln for ln in lines if ln]
            last = lines[-1] if lines else "no message on stderr"
            raise InputError(f"{tool} failed (exit {err.returncode}): {last}") from None


def build_tree(sequences: Sequence[str], workdir: Path, threads: int = 1):
    """Align, infer and midpoint-root; return (skbio TreeNode with sequence tips, alignment).

    ``alignment`` maps each sequence to its aligned row.
    """
    mafft = find_tool(["mafft"], "mafft")
    fasttree = find_tool(["fasttree", "FastTree"], "fasttree")
    record_tool("mafft", [mafft, "--version"])
    record_tool("fasttree", [fasttree, "-help"])  # its first line: "FastTree 2.1.11 ..."
    from skbio import TreeNode  # slow import (~3 s): only once the tools are known to exist

    fasta = workdir / "asvs.fasta"
    aligned = workdir / "aligned.fasta"
    newick = workdir / "fasttree.nwk"
    names = write_fasta(sequences, fasta)
    by_name = dict(zip(names, sequences, strict=True))

    start = time.perf_counter()
    run_tool("MAFFT", mafft_command(mafft, fasta, usable_threads(threads)), aligned)
    rows = parse_fasta(aligned.read_text(encoding="utf-8"), "MAFFT's alignment")
    if set(rows) != set(names):
        raise InputError(
            f"MAFFT produced {len(rows)} aligned sequences for {len(names)} inputs; "
            "(MAFFT can exit 0 after an internal error; run it by hand on the sequences)"
        )
    width = len(next(iter(rows.values())))
    log.info(
        "MAFFT aligned %d sequences to %d columns in %.1f s",
        len(rows),
        width,
        time.perf_counter() - start,
    )

    start = time.perf_counter()
    run_tool("FastTree", fasttree_command(fasttree, aligned), newick)
    try:
        tree = TreeNode.read(str(newick), format="newick")
    except Exception as err:
        raise InputError(f"FastTree output is not a readable newick tree: {err}") from None
    tips = [tip.name for tip in tree.tips()]
    if sorted(tips) != sorted(names):
        raise InputError(f"FastTree tree has {len(tips)} tips for {len(names)} input sequences")
    log.info("FastTree built a %d-tip tree in %.1f s", len(tips), time.perf_counter() - start)

    start = time.perf_counter()
    # Numeric internal labels -> .support, so rerooting keeps them on their branches.
    tree.assign_supports()
    tree = tree.root_at_midpoint()
    for tip in tree.tips():
        tip.name = by_name[tip.name]
    log.info("midpoint-rooted the tree in %.1f s", time.perf_counter() - start)
    return tree, {by_name[name]: row for name, row in rows.items()}


def make_tree(
    table: Path, output: Path, *, threads: int = 1, keep_alignment: Path | None = None
) -> None:
    """Write the midpoint-rooted tree of ``table``'s sequences to ``output`` (and the
    alignment to ``keep_alignment``); output names and locations are checked before any work."""
    check_output_file(output, NEWICK_SUFFIXES, "tree")
    if keep_alignment is not None:
        check_output_file(keep_alignment, FASTA_SUFFIXES, "alignment")
    total = time.perf_counter()
    start = time.perf_counter()
    sequences = read_sequences(table)
    log.info(
        "read %d ASV sequences from %s in %.1f s",
        len(sequences),
        table,
        time.perf_counter() - start,
    )
    with tempfile.TemporaryDirectory(prefix="aam-tree-") as tmp:
        tree, alignment = build_tree(sequences, Path(tmp), threads=threads)

    with atomic_output(output) as tmp_tree:
        tree.write(str(tmp_tree), format="newick")
        if keep_alignment is not None:
            with atomic_output(keep_alignment) as tmp_aln:
                with open(tmp_aln, "w") as handle:
                    for seq in sequences:
                        handle.write(f">{seq}\n{alignment[seq]}\n")
            log.info("wrote alignment %s", keep_alignment)
    log.info(
        "wrote %s (%d tips) in %.1f s total",
        output,
        len(sequences),
        time.perf_counter() - total,
    )
