"""One name per stage: a rule that runs `aam <command>` carries the command's name, logs under
it, and a cluster job is sized by each site profile (static checks of workflow/rules). That it
fingerprints that command's code, waits for the image it runs in and benchmarks beside its log
(aam.workflow.snakefile.shared_directives): test_workflow_style.py, on the parsed workflow."""

import re

import pytest
import yaml
from checkout import REPO

from aam.cli import COMMANDS

# stage_tree also runs `aam stage`: the optional tree is staged by a rule of its own (stage.smk);
# baselines_on and predict_on run `aam baselines` / `aam predict` for another dataset (predict_on);
# cv_split, learning_curve_split and new_study_split run `aam split` for a fold of a
# cross-validation, a learning-curve point or a new-study point, subset_baselines `aam
# baselines` for any of them.
SAME_COMMAND = {
    "stage_tree": "stage",
    "stage_taxonomy": "stage",
    "baselines_on": "baselines",
    "predict_on": "predict",
    "ensemble": "predict",
    "cv_split": "split",
    "learning_curve_split": "split",
    "new_study_split": "split",
    "search_split": "split",
    "subset_baselines": "baselines",
}


# Rules without a provenance record: they gather other jobs' outputs (each with its record, on
# the landing page) into a table, a figure or a page, or build the image (not aam: every job's
# record names the image it ran in, container_image).
GATHER = {
    *("plot_history", "summary", "leaderboard", "learning_curve", "new_study"),
    *("cross_validation", "search_best", "profiling_report", "overview", "build_container"),
}
OUTPUTS = re.compile(r"^( +)output:\n((?:\1 +.*\n)+)", re.M)
PROVENANCE = re.compile(r'^\s+provenance=WORK\s+/\s+f?"[^"]*provenance\.json",$', re.M)


def _rules() -> dict[str, str]:
    """rule name -> its text, from every workflow/rules/*.smk; a rule made by `use rule BASE
    as NAME with:` has its own text, then BASE's (its shell)."""
    rules, derived = {}, {}
    for path in sorted((REPO / "workflow/rules").glob("*.smk")):
        chunks = re.split(
            r"^\s*(?:rule (\w+)|use rule (\w+) as (\w+) with):", path.read_text(), flags=re.M
        )
        for name, base, alias, body in zip(*(chunks[k::4] for k in range(1, 5)), strict=True):
            if name:
                rules[name] = body
            else:
                derived[alias] = (base, body)
    rules.update({alias: body + rules[base] for alias, (base, body) in derived.items()})
    return rules


def _local_rules() -> set[str]:
    """Rules named by a `localrules:` directive or marked `localrule: True`."""
    local = {rule for rule, body in _rules().items() if re.search(r"localrule:\s+True", body)}
    for path in sorted((REPO / "workflow/rules").glob("*.smk")):
        for listed in re.findall(r"^localrules:\n((?:    \w+,\n)+)", path.read_text(), flags=re.M):
            local.update(re.findall(r"\w+", listed))
    return local


def _command(body: str) -> str | None:
    match = re.search(r"-m aam (?:--provenance \{[\w.:]+\} )?([\w-]+)", body)
    return match.group(1) if match else None


def test_each_rule_is_named_after_the_aam_command_it_runs():
    named = {}
    for rule, body in _rules().items():
        command = _command(body)
        if command is None:
            continue
        assert command in COMMANDS, f"rule {rule}: aam {command} is not a command"
        assert SAME_COMMAND.get(rule, rule) == command.replace("-", "_"), (rule, command)
        named[rule] = command
    assert {
        "stage",
        "tree",
        "unifrac",
        "split",
        "pretrain",
        "finetune",
        "predict",
        "plot_history",
        "profile",
        "profiling_report",
        "validate",
        "baselines",
        "cv_split",
        "learning_curve_split",
        "subset_baselines",
        "cross_validation",
        "learning_curve",
    } <= set(named)


def test_build_container_alone_goes_without_the_image():
    """It makes the image (`container: None`); shared_directives gives every other rule the
    image as an input (``on_host``: build_container alone; a multi-node pretraining runs its
    shell on the host but starts the image on each node)."""
    on_host = {
        rule
        for rule, body in _rules().items()
        if re.search(r"container:\s+None$", body, flags=re.M)
    }
    assert on_host == {"build_container"}


def test_every_rule_has_a_log_under_its_name():
    """Its benchmark, beside the log (benchmarks/<rule>/), is given by shared_directives."""
    for rule, body in _rules().items():
        match = re.search(r"^\s+log:\s+WORK / f?\"logs/(\w+)/", body, flags=re.M)
        assert match and match.group(1) == rule, f"rule {rule}: log not in logs/{rule}/"


@pytest.mark.parametrize("profile", ["cosmos", "lumi"])
def test_a_rule_running_another_rules_command_gets_its_resources(profile):
    # The site DAG of test_slurm_profiles has no predict_on dataset: its rules are checked here.
    settings = yaml.safe_load((REPO / f"profiles/{profile}/config.yaml").read_text())
    for rule, namesake in SAME_COMMAND.items():
        if rule in _local_rules():
            continue
        for section in ("set-resources", "set-threads"):
            assert settings[section].get(rule) == settings[section].get(namesake), (rule, section)
            assert settings[section].get(rule) is not None, (rule, section)


def test_every_cluster_job_has_its_resources_in_each_site_profile():
    """A rule that is not a localrule runs as a SLURM job: each site profile sizes it (rule
    build_container sets its own resources in container.smk)."""
    cluster = set(_rules()) - _local_rules() - {"build_container"}
    assert {"pretrain", "baselines", "subset_baselines"} <= cluster
    for site in ("cosmos", "lumi"):
        profile = yaml.safe_load((REPO / f"profiles/{site}/config.yaml").read_text())
        missing = cluster - set(profile["set-resources"])
        assert not missing, f"profiles/{site}: no set-resources for {sorted(missing)}"


def test_every_rule_that_computes_writes_its_provenance_record():
    """Its own output ``provenance`` (`use rule` replaces the outputs: a derived rule names its
    own), written by ``aam --provenance`` (the versions of what the job ran, for the landing
    page's software table and methods)."""
    rules = _rules()
    assert GATHER <= set(rules)
    for rule, body in rules.items():
        outputs = OUTPUTS.search(body).group(2)  # a derived rule's own come first
        declared = bool(PROVENANCE.search(outputs))
        written = "-m aam --provenance {output.provenance:q} " in body
        assert declared == written == (rule not in GATHER), rule
