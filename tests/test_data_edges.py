"""Bad data at the edges of the commands (issue 23 B): split tables, non-numeric targets,
`#q2:types` declarations, counts beyond float32, splits without training samples, and sample
IDs an lsmat TSV cannot carry. Each is one `aam <command>: error:` line naming the file, exit
status 2, nothing written, found before any training or UniFrac is computed."""

from __future__ import annotations

import logging
from pathlib import Path

import biom
import numpy as np
import pandas as pd
import pytest
import skbio
from biom.util import biom_open
from errors import one_line_error

from aam.cli import main
from aam.data.metadata import load_metadata
from aam.data.split import read_split
from aam.training.inputs.study import Labels, load_study
from aam.unifrac.io import write_distance_matrix
from aam.workflow.dataset_checks import check_dataset

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
MICRO = (
    "--embedding-dim 8 --attention-heads 2 --layers 1 --max-bp 24 --token-limit 8 "
    "--epochs 1 --batch-size 4 --threads 2 --no-progress"
).split()
IDS = [f"s{k:02d}" for k in range(12)]


def aam(*args: str | Path) -> int:
    """Exit status of `aam ARGS` run in-process (argparse errors raise SystemExit)."""
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


def refused(rc: int, capsys, command: str, out: Path, *expected: str) -> str:
    """Exit 2, exactly one stderr line (the error) holding ``expected``, nothing in ``out``."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(f"aam {command}: error: "), err
    assert rc == 2, err
    for text in expected:
        assert text in errors[0], errors[0]
    assert not out.exists() or not list(out.iterdir()), list(out.iterdir())
    return errors[0]


def write_table(path: Path, counts: np.ndarray, ids: list[str] = IDS) -> Path:
    rng = np.random.default_rng(7)
    asvs = ["".join(rng.choice(list("ACGT"), 24)) for _ in range(counts.shape[0])]
    with biom_open(str(path), "w") as handle:
        biom.Table(counts, asvs, ids).to_hdf5(handle, "aam tests")
    return path


def micro_counts() -> np.ndarray:
    counts = np.random.default_rng(7).integers(0, 20, size=(8, len(IDS))).astype(float)
    counts[0] += 1
    return counts


def write_metadata(path: Path, ages: list[str], types: str | None = None) -> Path:
    lines = ["sample_id\tage\tsite"]
    if types is not None:
        lines.append(f"#q2:types\t{types}\tcategorical")
    sites = ["gut", "oral"] * (len(IDS) // 2)
    lines += [f"{sid}\t{age}\t{site}" for sid, age, site in zip(IDS, ages, sites, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


AGES = [f"{age:g}" for age in np.linspace(20, 70, len(IDS))]


@pytest.fixture
def micro(tmp_path) -> tuple[Path, Path]:
    """A 12-sample table of 24-bp ASVs and its metadata (age, site)."""
    return (
        write_table(tmp_path / "table.biom", micro_counts()),
        write_metadata(tmp_path / "metadata.tsv", AGES),
    )


def finetune(table: Path, metadata: Path, out: Path, *extra: str | Path) -> int:
    inputs = ["--table", table, "--metadata", metadata, "--target-column", "age"]
    return aam("finetune", *inputs, "--output-dir", out, *MICRO, *extra)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """model.pt of a one-epoch fine-tune on age of the 12-sample table."""
    root = tmp_path_factory.mktemp("edges")
    table = write_table(root / "table.biom", micro_counts())
    metadata = write_metadata(root / "metadata.tsv", AGES)
    assert finetune(table, metadata, root / "train") == 0
    return root / "train" / "model.pt"


# --- 1. split tables ------------------------------------------------------------------------

DEMO_IDS = list(pd.read_csv(DEMO / "metadata.tsv", sep="\t", dtype=str)["sample_id"])


def demo_split(labels: dict[int, str] | None = None) -> str:
    """The demo samples as a split table: alternately train and val, ``labels`` changed."""
    rows = {k: "train" if k % 2 else "val" for k in range(len(DEMO_IDS))}
    rows.update(labels or {})
    return "sample_id\tsplit\n" + "".join(f"{DEMO_IDS[k]}\t{v}\n" for k, v in rows.items())


BAD_SPLITS = {
    "duplicate-id": (
        demo_split() + f"{DEMO_IDS[4]}\ttrain\n",
        f"sample {DEMO_IDS[4]} is listed 2 times (lines 6, 402",
    ),
    "duplicate-same-label": (demo_split() + f"{DEMO_IDS[1]}\ttrain\n", "listed 2 times"),
    "empty-file": ("", "not a split table (the file is empty)"),
    "blank-lines-only": ("\n\n", "not a split table (the file is empty)"),
    "header-only": ("sample_id\tsplit\n", "no sample lines under the header"),
    "no-header": (demo_split().split("\n", 1)[1], "no header line (line 1 is a sample"),
    "other-header": ("id\tfold\n" + demo_split().split("\n", 1)[1], "the header is id, fold"),
    "one-column": ("sample_id\n" + "\n".join(DEMO_IDS) + "\n", "the header is sample_id, not"),
    "unknown-label": (demo_split({5: "holdout"}), f"line 7, sample {DEMO_IDS[5]}: unknown split"),
    "label-case": (demo_split({5: "Train"}), "unknown split 'Train'"),
    "blank-id": (demo_split() + "\ttrain\n", "1 line(s) with a blank sample ID (line 402)"),
    "blank-label": (demo_split({3: ""}), "1 line(s) with a blank split (line 5)"),
    "extra-field": (demo_split() + "x\ttrain\tmore\n", "Expected 2 fields in line 402, saw 3"),
    "not-utf8": (b"\xff\xfe\x00garbage\x00", "not a split table"),
    "no-train": (
        demo_split({k: "test" for k in range(1, len(DEMO_IDS), 2)}),
        "0 train sample(s) among the 400 samples used (train 0, val 200, test 200)",
    ),
    "one-train": (
        demo_split({k: "test" for k in range(3, len(DEMO_IDS), 2)}),
        "1 train sample(s) among the 400 samples used (train 1, val 200, test 199)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SPLITS))
@pytest.mark.parametrize("command", ["pretrain", "finetune", "baselines"])
def test_bad_split_tables(tmp_path, capsys, case, command):
    content, phrase = BAD_SPLITS[case]
    split = tmp_path / "split.tsv"
    (split.write_bytes if isinstance(content, bytes) else split.write_text)(content)
    out = tmp_path / "out"
    table, metadata = DEMO / "table.biom", DEMO / "metadata.tsv"
    inputs = ["--table", table, "--split", split]
    if command == "baselines":
        args = [
            *inputs,
            "--metadata",
            metadata,
            "--target-column",
            "age",
            "--output",
            out / "b.tsv",
        ]
    else:
        target = ["--metadata", metadata, "--target-column", "age"] if command == "finetune" else []
        args = [*inputs, "--tree", DEMO / "tree.nwk", *target, "--output-dir", out, *MICRO]
    refused(aam(command, *args), capsys, command, out, str(split), phrase)


@pytest.mark.parametrize("case", sorted(set(BAD_SPLITS) - {"no-train", "one-train"}))
def test_bad_split_tables_in_the_workflow_check(tmp_path, case):
    content, phrase = BAD_SPLITS[case]
    split = tmp_path / "split.tsv"
    (split.write_bytes if isinstance(content, bytes) else split.write_text)(content)
    files = (DEMO / "table.biom", DEMO / "metadata.tsv", "age", [])
    message = one_line_error(check_dataset, "demo", *files, split_file=split)
    assert str(split) in message and phrase in message


def test_workflow_check_counts_train_samples(tmp_path):
    split = tmp_path / "split.tsv"
    split.write_text(demo_split({k: "test" for k in range(3, len(DEMO_IDS), 2)}))
    files = (DEMO / "table.biom", DEMO / "metadata.tsv", "age", [])
    message = one_line_error(check_dataset, "demo", *files, split_file=split)
    assert "only 1 sample is labelled train (train 1, val 200, test 199" in message


def test_split_table_cells_are_read_as_written(tmp_path):
    split = tmp_path / "split.tsv"
    split.write_text('sample_id\tsplit\nNA\ttrain\n"a""b"\tval\n\n s3 \t test \r\n')
    assert read_split(split).to_dict() == {"NA": "train", 'a"b': "val", "s3": "test"}


def test_training_samples_without_a_target(micro, tmp_path, capsys):
    table, _ = micro
    ages = [""] * 4 + AGES[4:]  # s00..s03, the train samples, have no age
    metadata = write_metadata(tmp_path / "ages.tsv", ages)
    labels = ["train"] * 4 + ["val"] * 4 + ["test"] * 4
    split = tmp_path / "split.tsv"
    split.write_text(
        "sample_id\tsplit\n" + "".join(f"{s}\t{v}\n" for s, v in zip(IDS, labels, strict=True))
    )
    out = tmp_path / "out"
    refused(
        finetune(table, metadata, out, "--split", split),
        capsys,
        "finetune",
        out,
        f"--split {split}: 0 train sample(s) among the 8 samples used (train 0, val 4, test 4; "
        f"4 train samples have no 'age' in {metadata})",
    )


def test_prediction_needs_no_train_sample(model, micro, tmp_path):
    table, metadata = micro
    split = tmp_path / "split.tsv"
    split.write_text("sample_id\tsplit\n" + "".join(f"{s}\ttest\n" for s in IDS))
    out = tmp_path / "out"
    args = ["--table", table, "--metadata", metadata, "--split", split, "--output-dir", out]
    assert aam("predict", "--model", model, *args, "--threads", "2") == 0
    assert len(pd.read_csv(out / "predictions.tsv", sep="\t")) == len(IDS)


# --- 2. non-numeric regression targets: training and prediction alike ------------------------

BAD_VALUES = {
    "text": ("abc", "s03='abc'"),
    "NA": ("NA", "s03='NA'"),
    "nan": ("nan", "s03='nan'"),
    "inf": ("inf", "s03="),
    "overflow": ("1e400", "s03="),
    "comma-decimal": ("40,5", "s03='40,5'"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
@pytest.mark.parametrize("command", ["finetune", "predict"])
def test_non_numeric_target_values(model, micro, tmp_path, capsys, case, command):
    value, shown = BAD_VALUES[case]
    table, _ = micro
    metadata = write_metadata(tmp_path / "bad.tsv", [*AGES[:3], value, *AGES[4:]])
    out = tmp_path / "out"
    if command == "finetune":
        rc = finetune(table, metadata, out)
    else:
        args = ["--table", table, "--metadata", metadata, "--output-dir", out, "--threads", "2"]
        rc = aam("predict", "--model", model, *args)
    line = refused(rc, capsys, command, out, str(metadata), "column 'age'", shown)
    assert "leave the cells empty to mark them missing" in line


def test_empty_target_cells_stay_missing(model, micro, tmp_path):
    table, _ = micro
    metadata = write_metadata(tmp_path / "gaps.tsv", [*AGES[:3], "", " ", *AGES[5:]])
    out = tmp_path / "out"
    args = ["--table", table, "--metadata", metadata, "--output-dir", out, "--threads", "2"]
    assert aam("predict", "--model", model, *args) == 0
    metrics = pd.read_json(out / "metrics.json", typ="series")
    assert metrics["excluded"] == {"no_target_value": ["s03", "s04"]}
    assert finetune(table, metadata, tmp_path / "train") == 0


def test_insdc_missing_terms_are_missing_where_declared(model, micro, tmp_path):
    table, _ = micro
    ages = [*AGES[:3], "not collected", "missing", *AGES[5:]]
    metadata = write_metadata(tmp_path / "insdc.tsv", ages)
    text = metadata.read_text().split("\n", 1)
    metadata.write_text(f"{text[0]}\n#q2:missing\tINSDC:missing\t\n{text[1]}")
    assert load_metadata(metadata)["age"].isna().sum() == 2
    out = tmp_path / "out"
    args = ["--table", table, "--metadata", metadata, "--output-dir", out, "--threads", "2"]
    assert aam("predict", "--model", model, *args) == 0
    metrics = pd.read_json(out / "metrics.json", typ="series")
    assert metrics["excluded"] == {"no_target_value": ["s03", "s04"]}


@pytest.mark.parametrize(
    ("directive", "ages", "phrase"),
    [
        ("#q2:missing\tNA\t", AGES, "the #q2:missing row gives column age the scheme 'NA'"),
        (
            "#q2:missing\tno-missing\t",
            [*AGES[:3], "", *AGES[4:]],
            "column age is declared no-missing (#q2:missing) but sample s03 has no value",
        ),
    ],
    ids=["unknown-scheme", "no-missing"],
)
def test_bad_missing_directives(tmp_path, directive, ages, phrase):
    metadata = write_metadata(tmp_path / "m.tsv", ages)
    text = metadata.read_text().split("\n", 1)
    metadata.write_text(f"{text[0]}\n{directive}\n{text[1]}")
    assert phrase in one_line_error(load_metadata, metadata)


# --- 3. `#q2:types` declarations --------------------------------------------------------------


@pytest.mark.parametrize("command", ["finetune", "predict"])
def test_regression_target_declared_categorical(model, micro, tmp_path, capsys, command):
    table, _ = micro
    metadata = write_metadata(tmp_path / "typed.tsv", AGES, types="categorical")
    out = tmp_path / "out"
    if command == "finetune":
        rc = finetune(table, metadata, out)
    else:
        args = ["--table", table, "--metadata", metadata, "--output-dir", out, "--threads", "2"]
        rc = aam("predict", "--model", model, *args)
    refused(
        rc,
        capsys,
        command,
        out,
        f"{metadata}: column 'age' is declared categorical in the #q2:types row",
        "--classifier",
    )


@pytest.mark.parametrize(
    ("types", "ages", "phrase"),
    [
        ("categorical", AGES, "column 'age' is declared categorical in the #q2:types row"),
        (None, [*AGES[:3], "abc", *AGES[4:]], "1 non-numeric or infinite values (s03='abc')"),
    ],
)
def test_workflow_check_reads_a_regression_target_as_training_does(
    micro, tmp_path, types, ages, phrase
):
    table, _ = micro
    metadata = write_metadata(tmp_path / "m.tsv", ages, types=types)
    message = one_line_error(check_dataset, "d", table, metadata, "age", [])
    assert message.startswith(f"datasets.d.metadata: {metadata}: ") and phrase in message
    counts = check_dataset("d", table, metadata, "age", [], classifier=True)
    assert counts.with_target == len(IDS)  # a classifier's labels may be any text


def test_unknown_declared_type(tmp_path):
    metadata = write_metadata(tmp_path / "typo.tsv", AGES, types="numerical")
    message = one_line_error(load_metadata, metadata)
    assert message.startswith(f"{metadata}: the #q2:types row declares column age 'numerical'")


def test_declared_numeric_classes_and_covariates_are_logged(micro, tmp_path, caplog):
    table, _ = micro
    metadata = tmp_path / "typed.tsv"
    rows = [f"{sid}\t{k % 2 + 1}\t{k % 3}" for k, sid in enumerate(IDS)]
    metadata.write_text("\n".join(["sample_id\tage\tsite", "#q2:types\tnumeric\tnumeric", *rows]))
    with caplog.at_level(logging.INFO, logger="aam.training.inputs.study"):
        study = load_study(
            table,
            max_bp=24,
            labels=Labels(metadata, target="age", classifier=True, categorical=["site"]),
        )
    assert study.classes == ["1", "2"] or study.classes == ["1.0", "2.0"]
    logged = [r.getMessage() for r in caplog.records]
    assert any("declared numeric (#q2:types) and used as a classifier target" in m for m in logged)
    assert any("declared numeric (#q2:types) and used as a covariate" in m for m in logged)


# --- 4. counts beyond the training precision --------------------------------------------------


@pytest.mark.parametrize(
    ("case", "phrase"),
    [
        ("one-count", "sample s05: 1e+39 reads"),
        ("sum", "sample s05: 4e+38 reads, 2e+38 of them ASV"),
    ],
)
@pytest.mark.parametrize("command", ["finetune", "predict"])
def test_counts_beyond_float32(model, tmp_path, capsys, case, phrase, command):
    counts = micro_counts()
    counts[:, 5] = 0
    if case == "one-count":
        counts[2, 5] = 1e39
    else:
        counts[2, 5] = counts[3, 5] = 2e38
    table = write_table(tmp_path / "big.biom", counts)
    metadata = write_metadata(tmp_path / "metadata.tsv", AGES)
    out = tmp_path / "out"
    if command == "finetune":
        rc = finetune(table, metadata, out)
    else:
        rc = aam("predict", "--model", model, "--table", table, "--output-dir", out)
    line = refused(rc, capsys, command, out, str(table), phrase, "float32")
    assert "divide the counts by a constant" in line


def test_counts_beyond_float32_in_the_workflow_check(tmp_path):
    counts = micro_counts()
    counts[2, 5] = 1e39
    table = write_table(tmp_path / "big.biom", counts)
    metadata = write_metadata(tmp_path / "metadata.tsv", AGES)
    message = one_line_error(check_dataset, "d", table, metadata, "age", [])
    assert message.startswith(f"datasets.d.table: {table}: 1 sample(s) hold more reads")


# --- 5. a split without training samples: see BAD_SPLITS no-train / one-train above ------------


# --- 6. sample IDs of an lsmat TSV ------------------------------------------------------------

BAD_TSV_IDS = {
    "double-quote": ('a"b', "holds a double quote"),
    "quoted": ('"s1"', "holds a double quote"),
    "single-quote": ("it's", "holds a single quote"),
    "comma": ("a,b", "holds a comma"),
    "tab": ("a\tb", "holds a tab"),
    "newline": ("a\nb", "holds a line break"),
    "carriage-return": ("a\rb", "holds a line break"),
    "leading-space": (" a", "starts or ends with whitespace"),
    "trailing-space": ("a ", "starts or ends with whitespace"),
    "form-feed": ("\x0ca", "starts or ends with whitespace"),
    "empty": ("", "is empty"),
    "hash-first": ("#a", "starts with '#' and comes first"),
}


@pytest.mark.parametrize("case", sorted(BAD_TSV_IDS))
def test_lsmat_ids_refused_before_computing(tmp_path, capsys, monkeypatch, case):
    import aam.commands.unifrac as command

    def never(*args, **kwargs):
        raise AssertionError("UniFrac computed for IDs the output cannot hold")

    monkeypatch.setattr(command, "compute_unifrac", never)
    bad, phrase = BAD_TSV_IDS[case]
    full = biom.load_table(str(DEMO / "table.biom"))
    ids = [str(s) for s in full.ids()[:6]]
    table = full.filter(ids, inplace=False).remove_empty(axis="observation")
    table = table.update_ids({ids[0]: bad}, axis="sample", strict=False, inplace=False)
    path = tmp_path / "in" / "table.biom"
    path.parent.mkdir()
    with biom_open(str(path), "w") as handle:
        table.to_hdf5(handle, "aam tests")
    out = tmp_path / "out"
    out.mkdir()
    args = ["--table", path, "--tree", DEMO / "tree.nwk", "--metric", "unweighted"]
    args += ["--output", out / "u.tsv"]
    refused(
        aam("unifrac", *args, "--no-progress"),
        capsys,
        "unifrac",
        out,
        phrase,
        "write the matrix as .h5",
    )


@pytest.mark.parametrize("case", sorted(BAD_TSV_IDS))
def test_lsmat_writer_refuses_what_skbio_cannot_read_back(tmp_path, case):
    bad, phrase = BAD_TSV_IDS[case]
    message = one_line_error(write_distance_matrix, tmp_path / "dm.tsv", [bad, "s2"], np.eye(2))
    assert message.startswith(f"{tmp_path / 'dm.tsv'}: sample ID ") and phrase in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "ids",
    [
        ["10317.000003995", "550.L6S86.s.6.sequence", "1841.T20837"],
        ["a b", "x#y", "s;1", "s:2", "p|q"],
        ["é sample", "中文", "a\\b", "(x)", "NA"],
        ["s1", "#2", "s3"],
        ["1", "2", "3"],
    ],
)
def test_lsmat_ids_skbio_reads_back(tmp_path, ids):
    path = tmp_path / "dm.tsv"
    rng = np.random.default_rng(0)
    m = rng.random((len(ids), len(ids)))
    m = m + m.T
    np.fill_diagonal(m, 0.0)
    write_distance_matrix(path, ids, m)
    dm = skbio.DistanceMatrix.read(str(path))  # the format sniffed, as users read it
    assert list(dm.ids) == ids
    np.testing.assert_allclose(dm.data, m)


def test_patience_without_validation_samples_is_refused(micro, tmp_path, capsys):
    out = tmp_path / "run"
    rc = finetune(*micro, out, "--val-fraction", "0", "--patience", "1", "--epochs", "3")
    refused(rc, capsys, "finetune", out, "--patience 1: early stopping needs validation samples")


def test_a_group_column_must_exist_and_differ_from_the_target(micro, tmp_path):
    table, _ = micro
    metadata = write_metadata(tmp_path / "m.tsv", AGES)
    message = one_line_error(check_dataset, "d", table, metadata, "age", group_column="age")
    assert message.startswith("datasets.d.group_column: 'age' is the target") and "null" in message
    message = one_line_error(check_dataset, "d", table, metadata, "age", group_column="study")
    assert f"{metadata} has no column(s) ['study']" in message and "group_column" in message
    assert check_dataset("d", table, metadata, "age", group_column="site").with_target == len(IDS)
    message = one_line_error(check_dataset, "d", table, metadata, "age", categorical=["age"])
    assert message.startswith("datasets.d.categorical: 'age' is the target")


def test_the_target_as_a_covariate_is_refused_by_finetune_and_baselines(micro, tmp_path, capsys):
    """Issue 61, item 1: the answer never reaches the model or the forest as an input."""
    out = tmp_path / "run"
    rc = finetune(*micro, out, "--categorical-columns", "site,age")
    refused(rc, capsys, "finetune", out, "'age' is the target and a covariate")
    table, metadata = micro
    split = tmp_path / "split.tsv"
    assert aam("split", "--table", table, "--output", split, "--test-fraction", "0.25") == 0
    capsys.readouterr()
    out = tmp_path / "baselines"
    args = ["--table", table, "--metadata", metadata, "--target-column", "age", "--split", split]
    rc = aam("baselines", *args, "--covariates", "age", "--output", out / "b.tsv")
    refused(rc, capsys, "baselines", out, "'age' is the target and a covariate")


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (lambda k: "", "covariate column 'extra' is empty for every sample; fill it or drop it"),
        (lambda k: f"{17.5 + k:g}", "holds 12 distinct numbers in 12 samples: it looks continuous"),
    ],
)
def test_an_empty_or_continuous_covariate_is_refused_naming_it(
    cells, message, micro, tmp_path, capsys
):
    """Issue 61, item 4: not an internal option's error later, not silent categories."""
    table, _ = micro
    metadata = tmp_path / "metadata.tsv"
    rows = [f"{sid}\t{age}\t{cells(k)}" for k, (sid, age) in enumerate(zip(IDS, AGES, strict=True))]
    metadata.write_text("\n".join(["sample_id\tage\textra", *rows]) + "\n")
    out = tmp_path / "run"
    rc = finetune(table, metadata, out, "--categorical-columns", "extra")
    refused(rc, capsys, "finetune", out, str(metadata), message)


def test_levels_unseen_in_training_are_counted_in_a_warning(micro, caplog):
    table, metadata = micro
    with caplog.at_level(logging.WARNING, logger="aam.training.inputs.study"):
        study = load_study(
            table,
            max_bp=24,
            labels=Labels(metadata, target="age", categorical=["site"], levels={"site": ["gut"]}),
            training=False,
        )
    assert (study.categories[:, 0] == 0).sum() == len(IDS) // 2
    assert any(
        f"column 'site': {len(IDS) // 2} of {len(IDS)} samples have a level the model was not"
        in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.parametrize(
    "feature_id",
    ["4b5eeb300368260019c1fbc7a3c718fc", "ACGT ACGT", "ASV_1", ""],
)
def test_feature_ids_that_are_not_sequences_are_refused(feature_id, tmp_path, capsys):
    """Issue 61, item 2: QIIME 2's md5 IDs (or any non-nucleotide ID) would tokenize to noise."""
    counts = micro_counts()
    rng = np.random.default_rng(7)
    asvs = ["".join(rng.choice(list("ACGTN"), 24)) for _ in range(counts.shape[0])]
    asvs[3] = feature_id or " "  # biom keeps IDs as given; a blank one is no sequence either
    table = tmp_path / "table.biom"
    with biom_open(str(table), "w") as handle:
        biom.Table(counts, asvs, IDS).to_hdf5(handle, "aam tests")
    metadata = write_metadata(tmp_path / "metadata.tsv", AGES)
    out = tmp_path / "run"
    rc = finetune(table, metadata, out)
    refused(rc, capsys, "finetune", out, "1 of 8 observation IDs are not nucleotide sequences")
