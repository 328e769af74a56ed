"""`aam taxonomy`: the RDP naive Bayesian classifier (Java; Debian's ``rdp-classifier``),
trained on a training set in RDP's format, assigns each ASV of a table a lineage, written as
QIIME 2's taxonomy.tsv (``Feature ID`` = the sequence, ``Taxon``, ``Confidence``).

RDP's format: a FASTA whose headers hold the lineage (``>id<TAB>Root;Bacteria;...;Genus``,
the same lowest rank for every sequence) and a taxonomy file of ``taxid*name*parent*depth*rank``
lines (the RDP training sets ship both: ``*.fa`` and ``*_db_taxid.txt``). Each ASV's lineage is
cut, as QIIME 2 cuts it, above the first rank of bootstrap confidence below ``confidence``; its
Confidence is that of the deepest rank kept (of the domain, for an ``Unassigned`` ASV).
"""

from __future__ import annotations

import logging
import math
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from aam.analysis.taxonomy import UNASSIGNED, md5_hex
from aam.errors import InputError
from aam.runtime.atomic import atomic_output
from aam.runtime.external_tools import DEBIAN_JAR, record_file, record_tool

log = logging.getLogger(__name__)

# The dispatcher of `train` and `classify` (Debian's rdp_classifier script runs the legacy
# ClassifierCmd, which only classifies).
MAIN_CLASS = "edu.msu.cme.rdp.classifier.cli.ClassifierMain"
# The ranks kept in a Taxon, QIIME 2's prefixes (SILVA's in QIIME 2: d__ ... s__); RDP's
# intermediate ranks (subclass, suborder, ...) are left out.
PREFIXES = {
    "domain": "d",
    "kingdom": "k",
    "phylum": "p",
    "class": "c",
    "order": "o",
    "family": "f",
    "genus": "g",
    "species": "s",
}
PROPERTIES = """bergeyTree=bergeyTrainingTree.xml
probabilityList=genus_wordConditionalProbList.txt
probabilityIndex=wordConditionalProbIndexArr.txt
wordPrior=logWordPrior.txt
classifierVersion=RDP Naive Bayesian rRNA Classifier, trained by aam taxonomy
"""


def rdp(jar: Path, heap: str, *args: str | Path) -> None:
    """Run ``ClassifierMain *args``; a failure is one InputError line (its last stderr line)."""
    if not jar.is_file():
        raise InputError(
            f"{jar}: RDP classifier not found; `apt-get install rdp-classifier` (Debian/Ubuntu) "
            "or give --rdp-jar the path of rdp_classifier.jar (classifier.jar)"
        )
    argv = ["java", f"-Xmx{heap}", "-cp", str(jar), MAIN_CLASS, *map(str, args)]
    log.info("running: %s", " ".join(argv))
    record_tool("java", ["java", "-version"])
    record_file("rdp-classifier", jar)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise InputError("java not found on PATH; apt-get install default-jre-headless") from None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "Exception" in line]
    if done.returncode or errors:
        last = (errors or lines or ["no message"])[0]
        raise InputError(f"RDP classifier {args[0]} failed (exit {done.returncode}): {last}")


def train(jar: Path, sequences: Path, taxa: Path, out_dir: Path, heap: str) -> Path:
    """Train the classifier on ``sequences`` and ``taxa`` into ``out_dir``; its properties file."""
    for path, what in ((sequences, "training sequences"), (taxa, "training taxonomy")):
        if not path.is_file():
            raise InputError(f"{path}: no such file ({what}); fix the dataset's taxonomy paths")
    rdp(jar, heap, "train", "-o", out_dir, "-s", sequences, "-t", taxa)
    properties = out_dir / "rRNAClassifier.properties"
    properties.write_text(PROPERTIES)
    return properties


def lineage(fields: list[str], confidence: float) -> tuple[str, float]:
    """QIIME 2's Taxon and Confidence of one allrank line's (name, rank, confidence) fields."""
    kept, last = [], math.nan
    for k in range(0, len(fields) - 2, 3):
        name, rank, conf = fields[k].strip('"'), fields[k + 1], float(fields[k + 2])
        if rank not in PREFIXES:
            continue
        if conf < confidence:
            last = conf if not kept else last
            break
        kept.append(f"{PREFIXES[rank]}__{name}")
        last = conf
    return ("; ".join(kept) if kept else UNASSIGNED), last


def read_allrank(path: Path, confidence: float) -> dict[str, tuple[str, float]]:
    """Sequence name -> (Taxon, Confidence) of RDP's allrank output."""
    result = {}
    with open(path) as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 5:  # name, orientation, then (name, rank, confidence) triples
                result[fields[0]] = lineage(fields[2:], confidence)
    return result


def classify_table(
    table: Path,
    sequences: Path,
    taxa: Path,
    output: Path,
    *,
    confidence: float,
    jar: Path = DEBIAN_JAR,
    heap: str = "4g",
) -> pd.DataFrame:
    """Train on (``sequences``, ``taxa``), classify every ASV of ``table`` and write QIIME 2's
    taxonomy.tsv to ``output`` (atomically); the rows written."""
    import biom

    try:
        asvs = [str(i) for i in biom.load_table(str(table)).ids(axis="observation")]
    except Exception as err:  # biom raises many types for malformed files
        raise InputError(f"{table}: cannot read BIOM table: {str(err)[:200]}") from None
    with tempfile.TemporaryDirectory(prefix="aam-rdp-") as tmp:
        work = Path(tmp)
        properties = train(jar, sequences, taxa, work, heap)
        query = work / "query.fasta"
        query.write_text("".join(f">{md5_hex(asv)}\n{asv}\n" for asv in asvs))
        rdp(jar, heap, "classify", "-t", properties, "-o", work / "allrank.tsv", query)
        assigned = read_allrank(work / "allrank.tsv", confidence)
    rows = [assigned.get(md5_hex(asv), (UNASSIGNED, math.nan)) for asv in asvs]
    frame = pd.DataFrame(
        {
            "Feature ID": asvs,
            "Taxon": [taxon for taxon, _ in rows],
            "Confidence": [conf for _, conf in rows],
        }
    )
    with atomic_output(output) as tmp_path:
        frame.to_csv(tmp_path, sep="\t", index=False, float_format="%.3g")
    missing = sum(md5_hex(asv) not in assigned for asv in asvs)
    log.info(
        "%s: %d ASVs: %d assigned (a domain at least), %d to a genus, %d not classified",
        output,
        len(frame),
        sum(taxon != UNASSIGNED for taxon, _ in rows),
        sum("g__" in taxon for taxon, _ in rows),
        missing,
    )
    return frame
