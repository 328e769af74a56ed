"""aam.data.metadata: sample-metadata TSVs in plain, QIIME 1 and QIIME 2 layouts."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from errors import one_line_error

from aam.data.metadata import load_metadata, numeric_column

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def write(tmp_path: Path, text: str, name: str = "meta.tsv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_demo_metadata():
    df = load_metadata(DEMO / "metadata.tsv")
    assert df.shape == (400, 2)
    assert df.index.name == "sample_id"
    assert df.index[0] == "10317.000003995"
    assert df["age"].dtype == np.float64


def test_qiime2_metadata(tmp_path):
    path = write(
        tmp_path,
        "#SampleID\tage\tbody_site\tstudy\n"
        "#q2:types\tnumeric\tcategorical\tcategorical\n"
        "# a comment\t\t\t\n"
        "10317.000001\t30\tgut\t10317\n"
        "10317.000010\t\tgut\t10317\n"
        "1.0\t41.5\toral\t550\n",
    )
    df = load_metadata(path)
    assert list(df.index) == ["10317.000001", "10317.000010", "1.0"]
    assert all(isinstance(i, str) for i in df.index)
    assert list(df.columns) == ["age", "body_site", "study"]
    assert df["age"].dtype == np.float64 and np.isnan(df.loc["10317.000010", "age"])
    assert df.loc["10317.000001", "study"] == "10317"  # declared categorical: stays text


@pytest.mark.parametrize(
    "header", ["sample_id", "#SampleID", "sample-id", "#Sample ID", "SampleID", "ID", "sample_name"]
)
def test_accepted_id_headers(tmp_path, header):
    df = load_metadata(write(tmp_path, f"{header}\tx\n007\t1\n"))
    assert list(df.index) == ["007"] and df.index.name == "sample_id"
    assert df.loc["007", "x"] == 1


def test_leading_comments_blank_lines_and_whitespace(tmp_path):
    text = "# exported by hand\n\nid\tcolour\n a \tred \n\nb\t\n"
    df = load_metadata(write(tmp_path, text))
    assert list(df.index) == ["a", "b"]
    assert df.loc["a", "colour"] == "red" and pd.isna(df.loc["b", "colour"])


def test_id_column_not_first(tmp_path):
    df = load_metadata(write(tmp_path, "age\tsample_id\n3\tx\n"))
    assert list(df.index) == ["x"] and list(df.columns) == ["age"]


def test_missing_file(tmp_path):
    message = one_line_error(load_metadata, tmp_path / "absent.tsv")
    assert "absent.tsv" in message and "not found" in message


def test_no_id_column(tmp_path):
    message = one_line_error(load_metadata, write(tmp_path, "name\tage\na\t1\n", "m.tsv"))
    assert "m.tsv" in message and "name, age" in message
    assert "sample_id" in message and "#SampleID" in message


def test_duplicate_ids(tmp_path):
    text = "sample_id\tage\na\t1\nb\t2\na\t3\nb\t4\nc\t5\n"
    message = one_line_error(load_metadata, write(tmp_path, text, "dup.tsv"))
    assert "dup.tsv" in message and "2 duplicate sample ID(s) (a, b)" in message


def test_empty_ids(tmp_path):
    text = "sample_id\tage\na\t1\n\t2\n"
    message = one_line_error(load_metadata, write(tmp_path, text, "e.tsv"))
    assert "e.tsv" in message and "empty sample ID" in message and "line 3" in message


def test_duplicate_columns(tmp_path):
    message = one_line_error(load_metadata, write(tmp_path, "id\tage\tage\na\t1\t2\n", "c.tsv"))
    assert "c.tsv" in message and "duplicate column names (age)" in message


def test_ragged_row(tmp_path):
    text = "id\tage\na\t1\nb\t2\t3\n"
    message = one_line_error(load_metadata, write(tmp_path, text, "r.tsv"))
    assert "r.tsv" in message and "malformed TSV" in message and "line 3" in message


@pytest.mark.parametrize("text", ["", "# only a comment\n", "id\tage\n"])
def test_no_header_or_rows(tmp_path, text):
    message = one_line_error(load_metadata, write(tmp_path, text, "h.tsv"))
    assert "h.tsv" in message


def test_numeric_column(tmp_path):
    path = write(tmp_path, "id\tage\tsite\na\t1\tgut\nb\t\toral\nc\t2.5\tgut\n")
    age = numeric_column(load_metadata(path), "age", path)
    assert age.dtype == np.float64 and age.index.name == "sample_id"
    np.testing.assert_array_equal(age.to_numpy(), [1.0, np.nan, 2.5])


def test_numeric_column_missing(tmp_path):
    path = write(tmp_path, "id\tage\tsite\na\t1\tgut\n", "m.tsv")
    message = one_line_error(numeric_column, load_metadata(path), "weight", path)
    assert "m.tsv" in message and "'weight'" in message and "age, site" in message


def test_numeric_column_non_numeric(tmp_path):
    text = "id\tage\na\t1\nb\tnot applicable\nc\t\nd\tinf\n"
    path = write(tmp_path, text, "n.tsv")
    message = one_line_error(numeric_column, load_metadata(path), "age", path)
    assert "n.tsv" in message and "'age'" in message
    assert "b='not applicable'" in message and "d='inf'" in message and "c=" not in message


def test_all_rows_wider_than_header(tmp_path):
    message = one_line_error(load_metadata, write(tmp_path, "id\tage\na\t1\t2\n", "w.tsv"))
    assert "w.tsv" in message and "3 fields but the header has 2" in message


def test_rows_narrower_than_header(tmp_path):
    df = load_metadata(write(tmp_path, "id\tage\tsite\na\t1\n"))
    assert df.loc["a", "age"] == 1 and pd.isna(df.loc["a", "site"])


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x85", "\x1e"])
def test_unicode_line_separators_keep_every_row(tmp_path, separator):
    # Before: str.splitlines() split the comment in two, the header was looked for one line
    # too late, and pandas then skipped sample a.
    text = f"# exported{separator}# by hand\nid\tage\na\t1\nb\t2\n"
    path = tmp_path / "m.tsv"
    path.write_text(text, encoding="utf-8", newline="")
    assert list(load_metadata(path).index) == ["a", "b"]


@pytest.mark.parametrize("text", ["id\tage\n", "id\tage\n\n\n"])
def test_header_without_rows(tmp_path, text):
    message = one_line_error(load_metadata, write(tmp_path, text, "h.tsv"))
    assert message.endswith("h.tsv: metadata has no sample rows; add one row per sample")
