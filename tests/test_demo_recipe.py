"""config/demo-recipe.yaml, how the demo's recipe was chosen: 4-fold cross-validation on the
demo split's training and validation samples only (tools/trainval_subset.py), four recipes."""

import subprocess
import sys

import biom
import pandas as pd
import yaml
from planning import REPO, planned

from aam.cli import main

DEMO = REPO / "data/demo"


def test_the_recipe_is_chosen_on_the_demo_splits_train_and_val_samples_only(tmp_path):
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    split = tmp_path / "split.tsv"
    args = ["split", "--table", DEMO / "table.biom", "--metadata", DEMO / "metadata.tsv"]
    args += ["--target-column", "age", "--output", split, "--seed", config["split"]["seed"]]
    args += ["--val-fraction", config["split"]["val_fraction"]]
    args += ["--test-fraction", config["split"]["test_fraction"]]
    assert main([str(a) for a in args]) == 0
    inputs = tmp_path / "inputs"
    tool = [sys.executable, str(REPO / "tools/trainval_subset.py"), "--split", str(split)]
    tool += ["--table", str(DEMO / "table.biom"), "--metadata", str(DEMO / "metadata.tsv")]
    subprocess.run([*tool, "--output-dir", str(inputs)], check=True, capture_output=True)

    labels = pd.read_csv(split, sep="\t", dtype=str).set_index("sample_id")["split"]
    kept = biom.load_table(str(inputs / "table.biom"))
    assert sorted(kept.ids()) == sorted(labels.index[labels != "test"]) and len(kept.ids()) == 320
    metadata = pd.read_csv(inputs / "metadata.tsv", sep="\t", dtype=str)
    assert sorted(metadata["sample_id"]) == sorted(kept.ids())

    recipe = yaml.safe_load((REPO / "config/demo-recipe.yaml").read_text())
    recipe["workdir"] = str(tmp_path / "work")
    recipe["datasets"]["trainval"] |= {
        "table": str(inputs / "table.biom"),
        "metadata": str(inputs / "metadata.tsv"),
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    plan = planned(path)
    assert sorted(plan.cv) == ["lr1e3", "pretrained", "scratch", "uw"]
    assert all(len(fold_plan["members"]) == 4 for fold_plan in plan.cv.values())
    demo_runs = config["runs"]
    assert plan.runs["scratch_f1"]["finetune"] == demo_runs["demo"]["finetune"]
    assert plan.runs["pretrained_f1"]["pretrain"] == demo_runs["demo_pretrained"]["pretrain"]
