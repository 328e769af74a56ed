"""config/oral.yaml, the full oral study of the README's table: valid, and its DAG is the one
the README describes (one pretraining shared by the microbiome-only and the covariate run)."""

import pytest
import yaml
from checkout import REPO, dry_run


@pytest.mark.workflow
def test_the_oral_config_plans_one_pretraining_for_both_runs(tmp_path, checkout_copy):
    config = yaml.safe_load((REPO / "config/oral.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    path = tmp_path / "oral.yaml"
    path.write_text(yaml.safe_dump(config))
    run = dry_run(checkout_copy, path, "--printshellcmds")
    assert run.returncode == 0, run.stderr[-2000:]
    table = run.stdout.split("Job stats:")[1].split("total")[0]
    counts = dict(line.split() for line in table.splitlines()[3:] if line.strip())
    assert counts["pretrain"] == "1" and counts["finetune"] == "2" and counts["baselines"] == "2"
    # its UniFrac matrices are built for analysis (unifrac.matrix: true); training reads the tree
    assert counts["unifrac"] == "2"
    finetune = [line for line in run.stdout.splitlines() if " finetune --table" in line]
    assert all("runs/oral/pretrain/encoder.pt" in line for line in finetune)
    assert all("/tree.nwk " in line and "--unifrac " not in line for line in finetune)
    covariates = [line for line in finetune if "--categorical-columns qiita_study_id" in line]
    assert len(covariates) == 1 and "runs/oral_study/" in covariates[0]
