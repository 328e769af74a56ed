"""Add column `subject` to data/oral-full/metadata.tsv: the person (or family) a sample came
from, where its ID says so. Study 2024 (mothers and infants) names the family in its sample IDs
(``2024.<visit>.MNIH<k>[N|NP|U].<barcode>...``): its samples are grouped by that family; every
other sample is its own subject (their IDs carry no person). Rerun after replacing the file:

    python tools/oral_subjects.py data/oral-full/metadata.tsv
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

FAMILY = re.compile(r"^2024\.[^.]+\.(MNIH\d+)")


def subject(sample_id: str) -> str:
    """The subject of one sample: ``2024.MNIH<k>`` for study 2024, else the sample itself."""
    found = FAMILY.match(sample_id)
    return f"2024.{found[1]}" if found else sample_id


def main(path: Path) -> None:
    metadata = pd.read_csv(path, sep="\t", dtype=str)
    metadata["subject"] = metadata["sample_id"].map(subject)
    metadata.to_csv(path, sep="\t", index=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
