"""Load a sample-metadata TSV (plain, QIIME 1 mapping file or QIIME 2 metadata)."""

from __future__ import annotations

import difflib
import io
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aam.data.reconcile import preview, printable
from aam.errors import InputError

# QIIME 2's sample ID headers (matched case-insensitively here) plus our own `sample_id`.
ID_HEADERS = (
    "sample_id",
    "#SampleID",
    "sample-id",
    "#Sample ID",
    "sampleid",
    "sample id",
    "id",
    "sample_name",
)
_ID_HEADERS_LOWER = {h.lower() for h in ID_HEADERS}
# The line breaks of pandas' parser: str.splitlines() also breaks at \x0c, \u2028, ..., which
# would shift the header line and make pandas skip sample rows.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NO_ROWS = "metadata has no sample rows; add one row per sample"
TYPES = ("categorical", "numeric")  # the column types of a QIIME 2 `#q2:types` row
_TYPES_ATTR = "q2:types"  # where load_metadata keeps the declared types (DataFrame.attrs)
# QIIME 2's `#q2:missing` schemes: which cells of a column mean "missing" besides empty ones.
INSDC_MISSING = ("not applicable", "missing", "not collected", "not provided", "restricted access")
MISSING_SCHEMES = {"blank": (), "no-missing": (), "insdc:missing": INSDC_MISSING}
COLUMNS_SHOWN = 10  # the columns a missing column's error lists (a Qiita file has over 100)


def load_metadata(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Metadata indexed by string sample ID (index name ``sample_id``).

    Lines before the header that start with ``#`` (other than a ``#SampleID``-style header)
    are comments, as are rows after it whose first cell starts with ``#`` (QIIME 2's
    ``#q2:types`` and ``#q2:missing`` directives included). Empty cells are NaN (missing), and
    so are the INSDC missing-value terms in a column ``#q2:missing`` marks ``INSDC:missing``
    (``no-missing``: an empty cell raises). Columns whose values all parse as numbers become
    numeric unless ``#q2:types`` declares them categorical; the declared types are kept
    (``declared_types``). A type or missing scheme QIIME 2 does not define raises.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "not found"
        raise InputError(f"{path}: metadata file {what}; check the path")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        reason = " ".join(str(err).split())
        raise InputError(f"{path}: cannot read metadata ({reason}); save it as UTF-8 TSV") from err
    lines = _LINE_BREAK.split(text)
    header_at = next((n for n, line in enumerate(lines) if _is_header(line)), None)
    if header_at is None:
        raise InputError(f"{path}: metadata has no header line; add a header row to the TSV")
    header = [cell.strip() for cell in lines[header_at].split("\t")]
    id_column = next((h for h in header if h.lower() in _ID_HEADERS_LOWER), None)
    if id_column is None:
        raise InputError(
            f"{path}: no sample ID column in header ({preview(header)}); name the ID column "
            f"one of: {', '.join(ID_HEADERS)} (case-insensitive)"
        )
    duplicated = sorted({h for h in header if header.count(h) > 1})
    if duplicated:
        raise InputError(f"{path}: duplicate column names ({preview(duplicated)}); rename them")
    try:
        raw = pd.read_csv(
            io.StringIO(text),
            sep="\t",
            skiprows=header_at + 1,
            header=None,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
        )
    except pd.errors.EmptyDataError as err:
        raise InputError(f"{path}: {_NO_ROWS}") from err
    except ValueError as err:  # pandas' ParserError names the line
        reason = " ".join(str(err).split())
        raise InputError(f"{path}: malformed TSV ({reason}); fix that row's tabs") from err
    if raw.shape[1] > len(header):
        raise InputError(
            f"{path}: rows have {raw.shape[1]} fields but the header has {len(header)}; "
            "fix the header or remove the extra tabs"
        )
    raw = raw.reindex(columns=range(len(header)), fill_value="").fillna("")
    raw.columns = header
    raw = raw.apply(lambda column: column.str.strip())
    # 1-based file line of each row: the header is line header_at + 1.
    raw.index = raw.index + header_at + 2
    directives = raw[raw.iloc[:, 0].str.startswith("#")]
    raw = raw.drop(directives.index)
    raw = raw[(raw != "").any(axis=1)]
    if raw.empty:
        raise InputError(f"{path}: {_NO_ROWS}")
    _check_ids(path, raw[id_column])
    types = _declared_types(path, directives, header[0], id_column)
    raw = _missing_as_empty(path, raw, directives, header[0], id_column)
    categorical = {column for column, kind in types.items() if kind == "categorical"}
    frame = raw.drop(columns=id_column).replace("", np.nan)
    for column in frame.columns:
        if column not in categorical:
            try:
                frame[column] = pd.to_numeric(frame[column])
            except ValueError:
                pass  # not all numbers: keep as text
    frame.index = pd.Index(raw[id_column], name="sample_id")
    frame.attrs[_TYPES_ATTR] = types
    return frame


def metadata_column(path: str | os.PathLike[str] | None, column: str, flag: str) -> pd.Series:
    """Column ``column`` of the metadata TSV ``path``, named by the command's ``flag`` (e.g.
    ``--group-column``); one line when there is no ``--metadata`` or no such column."""
    if path is None:
        raise InputError(f"{flag} {column}: needs --metadata")
    metadata = load_metadata(path)
    if column not in metadata.columns:
        hint = column_hint(column, metadata.columns)
        raise InputError(f"{path}: no column {column!r} ({flag}); {hint}")
    return metadata[column]


def column_hint(missing: str | Sequence[str], columns: Iterable[object]) -> str:
    """The tail of the error of a metadata lacking column(s) ``missing``: the closest of its
    ``columns`` to each (case aside), then the columns, ``COLUMNS_SHOWN`` at most."""
    names = [str(c) for c in columns]
    lowered = {name.lower(): name for name in reversed(names)}
    wanted = [missing] if isinstance(missing, str) else list(missing)
    guesses = []
    for column in wanted:
        close = difflib.get_close_matches(column.lower(), lowered, n=1)
        if close:
            named = lowered[close[0]]
            guesses.append(repr(named) if len(wanted) == 1 else f"{named!r} for {column!r}")
    guess = f"did you mean {', '.join(guesses)}? " if guesses else ""
    return f"{guess}columns: {preview(names, COLUMNS_SHOWN)}"


def declared_types(df: pd.DataFrame) -> dict[str, str]:
    """Column -> ``categorical`` or ``numeric`` as the metadata's ``#q2:types`` row declares
    them (columns it leaves empty, and metadata without the row: none)."""
    return dict(df.attrs.get(_TYPES_ATTR, {}))


def numeric_column(
    df: pd.DataFrame,
    column: str,
    path: str | os.PathLike[str],
    classifier: str = "train a classifier (--classifier)",
) -> pd.Series:
    """``df[column]`` (a regression target) as float, NaN where the cell is empty (missing).
    InputError for a missing column, a column ``#q2:types`` declares categorical or that holds
    mostly text (a category: the error says ``classifier``, how to predict its classes), or a
    value that is not a finite number (text such as ``abc`` or ``NA`` included): training and
    prediction read a target alike."""
    if column not in df.columns:
        raise InputError(f"{path}: no column {column!r}; {column_hint(column, df.columns)}")
    if declared_types(df).get(column) == "categorical":
        raise InputError(
            f"{path}: column {column!r} is declared categorical in the #q2:types row, but a "
            f"regression target must be numeric; {classifier}, or declare the column numeric "
            "in the #q2:types row"
        )
    values = df[column]
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    text = numbers.isna() & values.notna()
    bad = values[text | np.isinf(numbers)]
    if len(bad):
        shown = preview(f"{sample}={value!r}" for sample, value in bad.items())
        if 2 * text.sum() > values.notna().sum():
            raise InputError(
                f"{path}: column {column!r} holds text, not numbers ({text.sum()} of its "
                f"{values.notna().sum()} values, e.g. {preview(values[text].unique(), 3)}): a "
                f"category; to predict its classes {classifier}, or name a numeric target column"
            )
        raise InputError(
            f"{path}: column {column!r} has {len(bad)} non-numeric or infinite values "
            f"({shown}); fix them or leave the cells empty to mark them missing"
        )
    return numbers


def _is_header(line: str) -> bool:
    if not line.strip():
        return False
    first = line.split("\t", 1)[0].strip()
    return not first.startswith("#") or first.lower() in _ID_HEADERS_LOWER


def _check_ids(path: Path, ids: pd.Series) -> None:
    empty = ids.index[ids == ""]
    if len(empty):
        raise InputError(
            f"{path}: empty sample ID on {len(empty)} row(s) (line {preview(empty)}); "
            "fill in the IDs or delete those rows"
        )
    duplicated = ids[ids.duplicated()].unique()
    if len(duplicated):
        raise InputError(
            f"{path}: {len(duplicated)} duplicate sample ID(s) ({preview(duplicated)}); "
            "keep one row per sample"
        )


def _directive(
    directives: pd.DataFrame, name: str, first_column: str, id_column: str
) -> dict[str, str]:
    """Column -> non-empty cell of the first ``name`` directive row (``#q2:types``, ...)."""
    rows = directives[directives[first_column].str.lower() == name]
    if rows.empty:
        return {}
    cells = rows.iloc[0].items()
    return {c: v for c, v in cells if c not in (first_column, id_column) and v}


def _declared_types(
    path: Path, directives: pd.DataFrame, first_column: str, id_column: str
) -> dict[str, str]:
    """Column -> declared type of the ``#q2:types`` row (its empty cells: undeclared)."""
    declared = {}
    for column, kind in _directive(directives, "#q2:types", first_column, id_column).items():
        if kind.lower() not in TYPES:
            raise InputError(
                f"{path}: the #q2:types row declares column {printable(column)} {kind!r}; use "
                f"{' or '.join(TYPES)} (or leave the cell empty to infer it)"
            )
        declared[column] = kind.lower()
    return declared


def _missing_as_empty(
    path: Path, raw: pd.DataFrame, directives: pd.DataFrame, first_column: str, id_column: str
) -> pd.DataFrame:
    """``raw`` with the cells the ``#q2:missing`` row's scheme of their column calls missing
    emptied; InputError for an unknown scheme or an empty cell in a ``no-missing`` column."""
    schemes = _directive(directives, "#q2:missing", first_column, id_column)
    for column, scheme in schemes.items():
        if scheme.lower() not in MISSING_SCHEMES:
            raise InputError(
                f"{path}: the #q2:missing row gives column {printable(column)} the scheme "
                f"{scheme!r}; use blank, no-missing or INSDC:missing (or leave the cell empty)"
            )
        if scheme.lower() == "no-missing" and (raw[column] == "").any():
            sample = raw.loc[raw[column] == "", id_column].iloc[0]
            raise InputError(
                f"{path}: column {printable(column)} is declared no-missing (#q2:missing) but "
                f"sample {printable(sample)} has no value; fill it in or declare the column blank"
            )
        terms = MISSING_SCHEMES[scheme.lower()]
        if terms:
            raw = raw.copy()
            raw.loc[raw[column].isin(terms), column] = ""
    return raw
