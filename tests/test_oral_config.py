"""config/oral.yaml, the full oral study of docs/results.md's table: valid, and its DAG is the one
docs/results.md describes (one pretraining shared by the microbiome-only and the covariate run);
config/oral-full.yaml, the same study unrarefied: rarefied once in the pipeline, and a run that
draws afresh each epoch from the raw counts; config/oral-full-curve.yaml, its learning curve;
config/oral-full-levers.yaml, the levers of a stable fine-tune and the pretraining ablation;
config/oral-full-scratch-curve.yaml, the from-scratch series of the learning curve;
config/oral-grouped.yaml, config/oral.yaml split by study."""

import re
from pathlib import Path

import pytest
import yaml
from checkout import REPO, dry_run, job_counts
from planning import planned
from snakemake.utils import update_config

from aam.workflow.flags import Flags


@pytest.mark.workflow
def test_the_oral_config_plans_one_pretraining_for_both_runs(tmp_path, checkout_copy):
    config = yaml.safe_load((REPO / "config/oral.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    path = tmp_path / "oral.yaml"
    path.write_text(yaml.safe_dump(config))
    run = dry_run(checkout_copy, path, "--printshellcmds")
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    assert counts["pretrain"] == 1 and counts["finetune"] == 2 and counts["baselines"] == 2
    # its UniFrac matrices are built for analysis (unifrac.matrix: true); training reads the tree
    assert counts["unifrac"] == 2
    finetune = [line for line in run.stdout.splitlines() if " finetune --table" in line]
    assert all("runs/oral/pretrain/encoder.pt" in line for line in finetune)
    assert all("/tree.nwk " in line and "--unifrac " not in line for line in finetune)
    covariates = [line for line in finetune if "--categorical-columns qiita_study_id" in line]
    assert len(covariates) == 1 and "runs/oral_study/" in covariates[0]


@pytest.mark.workflow
def test_the_unrarefied_oral_config_rarefies_once_but_for_per_epoch_training(
    tmp_path, checkout_copy
):
    config = yaml.safe_load((REPO / "config/oral-full.yaml").read_text())
    config["workdir"] = work = str(tmp_path / "work")
    path = tmp_path / "oral-full.yaml"
    path.write_text(yaml.safe_dump(config))
    run = dry_run(checkout_copy, path, "--printshellcmds")
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(run.stdout)
    assert counts["rarefy"] == counts["baselines"] == counts["split"] == 1
    assert counts["pretrain"] == counts["finetune"] == counts["predict"] == 2
    data = f"{work}/data/oral_full"
    command = re.compile(r" -m aam --provenance \S+ rarefy ")
    rarefy = next(line for line in run.stdout.splitlines() if command.search(line))
    assert f"--table {data}/table.biom --output {data}/rarefied.biom" in rarefy
    assert "--rarefy-depth 1000 --seed 42" in rarefy
    # (command, run or None) -> the table it reads, and whether it draws each epoch / once
    read = {}
    for line in run.stdout.splitlines():
        found = re.search(r" -m aam (?:--provenance \S+ )?([\w-]+) .*--table (\S+)", line)
        if found and found[1] != "check-data":
            owner = re.search(r"/runs/(\w+)/", line)
            key = (found[1], owner[1] if owner and found[1] != "rarefy" else None)
            read[key] = (Path(found[2]).name, "--rarefy-each-epoch" in line)
    raw, once = ("table.biom", False), ("rarefied.biom", False)
    assert read[("split", None)] == read[("baselines", None)] == read[("unifrac", None)] == once
    for command in ("pretrain", "finetune", "predict", "importance"):
        assert read[(command, "once")] == once, command
        each = ("pretrain", "finetune")
        assert read[(command, "each_epoch")] == ("table.biom", command in each), command
    assert read[("rarefy", None)] == raw
    predict = next(
        line
        for line in run.stdout.splitlines()
        if " predict --model " in line and "runs/each_epoch/" in line
    )
    assert "--rarefy-depth 1000" in predict  # evaluation reads one fixed draw


def planned_overlay(base: str, overlay: str, tmp_path: Path):
    """The plan of config/``overlay`` merged over config/``base``, as Snakemake merges
    `--configfile A B` (nested keys updated in order), writing under ``tmp_path``."""
    config = yaml.safe_load((REPO / "config" / base).read_text())
    update_config(config, yaml.safe_load((REPO / "config" / overlay).read_text()))
    config["workdir"] = str(tmp_path / "work")
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(config))
    return planned(path)


def test_the_learning_curve_overlay_adds_three_strict_points_to_the_once_run(tmp_path):
    """config/oral-full-curve.yaml merged over config/oral-full.yaml, as Snakemake merges
    `--configfile A B` (nested keys updated in order)."""
    scheme = planned_overlay("oral-full.yaml", "oral-full-curve.yaml", tmp_path)
    assert scheme.curves["once"]["points"] == {"once_lc1": 0.1, "once_lc2": 0.25, "once_lc3": 0.5}
    assert scheme.curves["once"]["pretrain"] == "per_point" and "each_epoch" not in scheme.curves
    for point in ("once_lc1", "once_lc2", "once_lc3"):
        assert scheme.runs[point]["finetune"] == scheme.runs["once"]["finetune"]
        assert scheme.runs[point]["encoder_from"] is None  # each pretrains on its own samples
    assert scheme.split_part("once_lc2") == "lc/42/0.25"


def test_the_levers_overlay_adds_scratch_ema_and_an_ensemble_of_once(tmp_path):
    """config/oral-full-levers.yaml over config/oral-full.yaml: run `scratch` (no pretraining,
    once's model and fine-tuning), an EMA sweep from once's encoder, once with two more seeds."""
    scheme = planned_overlay("oral-full.yaml", "oral-full-levers.yaml", tmp_path)
    once = scheme.runs["once"]
    assert scheme.runs["scratch"]["model"] == once["model"]
    assert scheme.runs["scratch"]["finetune"] == once["finetune"]
    assert scheme.encoder("scratch") is None and "scratch" not in scheme.pretraining_runs
    assert scheme.ensembles == {"once": ["once", "once_e1", "once_e2"]}
    assert [scheme.runs[r]["finetune"]["seed"] for r in ("once_e1", "once_e2")] == [43, 44]
    decays = {r: scheme.runs[r]["finetune"]["ema_decay"] for r in scheme.sweeps["ema"]}
    assert decays == {"ema_s1": 0.99, "ema_s2": 0.998}
    for run in ("ema_s1", "ema_s2", "once_e1"):
        assert scheme.encoder(run) == scheme.encoder("once")
        assert {**scheme.runs[run]["finetune"], "ema_decay": 0, "seed": 42} == {
            **once["finetune"],
            "ema_decay": 0,
            "seed": 42,
        }


def test_the_scratch_curve_overlay_is_once_s_curve_from_scratch(tmp_path):
    """config/oral-full-scratch-curve.yaml over the levers (run `scratch`): scratch's points
    are from scratch, on the nested samples of once's points (config/oral-full-curve.yaml:
    the same fractions and seed), with once's model and fine-tuning."""

    def scheme(*overlays: str):
        config = yaml.safe_load((REPO / "config/oral-full.yaml").read_text())
        for overlay in overlays:
            update_config(config, yaml.safe_load((REPO / f"config/{overlay}.yaml").read_text()))
        config["workdir"] = str(tmp_path / "work")
        path = tmp_path / f"{overlays[-1]}.yaml"
        path.write_text(yaml.safe_dump(config))
        return planned(path)

    scratch = scheme("oral-full-levers", "oral-full-scratch-curve")
    once = scheme("oral-full-curve")
    points = scratch.curves["scratch"]["points"]
    assert points == {"scratch_lc1": 0.1, "scratch_lc2": 0.25, "scratch_lc3": 0.5}
    assert scratch.curves["scratch"]["pretrain"] == "none"
    for point, twin in zip(points, once.curves["once"]["points"], strict=True):
        assert scratch.encoder(point) is None
        assert scratch.split_part(point) == once.split_part(twin)
        assert scratch.runs[point]["finetune"] == once.runs[twin]["finetune"]
        assert scratch.runs[point]["model"] == once.runs[twin]["model"]


@pytest.mark.workflow
def test_the_grouped_overlay_splits_both_datasets_by_study(tmp_path):
    """config/oral-grouped.yaml over config/oral.yaml: the seeded split of each dataset keeps
    every study on one side (aam split --group-column qiita_study_id)."""
    scheme = planned_overlay("oral.yaml", "oral-grouped.yaml", tmp_path)
    flags = Flags(scheme)

    class Wildcards:
        dataset = ""

    for name in ("oral", "oral_study"):
        Wildcards.dataset = name
        assert "--group-column qiita_study_id" in flags.split(Wildcards)
        assert scheme.data_checks[name].count("--split-group-column qiita_study_id") == 1
