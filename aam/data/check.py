"""Up-front checks of a dataset, run by the workflow before any job is submitted."""

from __future__ import annotations

from pathlib import Path

from aam.data.metadata import load_metadata
from aam.data.table import load_table
from aam.errors import InputError


def check_dataset(
    name: str, table: Path, metadata: Path, target: str, categorical: list[str], tree: Path | None
) -> None:
    """Files exist, the target and covariate columns exist, table and metadata share samples."""
    for label, path in (("table", table), ("metadata", metadata), ("tree", tree)):
        if path is not None and not Path(path).is_file():
            raise InputError(f"datasets.{name}.{label}: {path} not found; fix the path in config")
    columns = load_metadata(metadata)
    missing = [c for c in [target, *categorical] if c not in columns.columns]
    if missing:
        raise InputError(
            f"datasets.{name}: {metadata} has no column(s) {missing} "
            f"(columns: {', '.join(map(str, columns.columns))}); fix target/categorical"
        )
    shared = set(map(str, load_table(table).ids())) & set(columns.index)
    if not shared:
        raise InputError(
            f"datasets.{name}: {table} and {metadata} share no sample IDs; "
            "check that both files describe the same samples"
        )
