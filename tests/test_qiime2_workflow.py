"""The demo DAG end to end from QIIME 2 artifacts: table.qza with md5 feature IDs,
rep-seqs.qza, rooted-tree.qza and taxonomy.qza built from data/demo (the tiny test config,
its dataset's files swapped for the artifacts). The staged files are the plain ones, with the
sequences as IDs, and the importance table names ASVs by the artifact's taxonomy."""

import biom
import pandas as pd
import yaml
from checkout import copy_checkout
from dag_run import run_snakemake
from qiime2_artifacts import DEMO, demo_artifacts


def test_demo_dag_from_qiime2_artifacts(tmp_path):
    root = copy_checkout(tmp_path / "repo")
    artifacts = demo_artifacts(root / "data/q2")
    config_path = root / "config/test.yaml"
    config = yaml.safe_load(config_path.read_text())
    dataset = config["datasets"]["demo"]
    for key, path in artifacts.items():
        dataset[key] = str(path.relative_to(root))
    config_path.write_text(yaml.safe_dump(config))

    run = run_snakemake(root, "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]

    work = root / config["workdir"]
    staged = biom.load_table(str(work / "data/demo/table.biom"))
    demo = biom.load_table(str(DEMO / "table.biom"))
    assert list(staged.ids("observation")) == list(demo.ids("observation"))
    assert (staged.matrix_data != demo.matrix_data).nnz == 0
    importance = pd.read_csv(next(work.glob("runs/*/importance/*.tsv")), sep="\t", comment="#")
    assert importance.astype(str).apply(lambda c: c.str.contains("Genus")).any().any()
