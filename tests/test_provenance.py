"""Code fingerprints: what each command can run, found statically per function and class
(synthetic packages for the resolver's rules; edits of a copy of the real package for the
rerun sets; a traced run for soundness); provenance records."""

import ast
import hashlib
import inspect
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from read_only import read_only_dir

import aam.workflow.fingerprint as fingerprint
from aam.cli import COMMANDS, main

MODULES = {command: module for command, (module, _) in COMMANDS.items()}
TRAINING = {"pretrain", "finetune", "predict"}


# --------------------------------------------------------------------------- synthetic packages

ENTRY = {
    "__init__.py": "",
    "__main__.py": "from pkg.cli import main\n\nmain()\n",
    "cli.py": "def main():\n    pass\n",
}


@pytest.fixture
def make_package(tmp_path, monkeypatch):
    """Write package ``pkg`` (an entry point plus the given files) and point the resolver at it;
    returns the reachable definitions of command module ``pkg.cmd`` as "module:name"."""

    def make(files: dict[str, str]) -> set[str]:
        for name, text in {**ENTRY, **files}.items():
            path = tmp_path / "pkg" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        monkeypatch.setattr(fingerprint, "PACKAGE", "pkg")
        monkeypatch.setattr(fingerprint, "PACKAGE_DIR", tmp_path / "pkg")
        return {f"{m}:{n}" for m, n in fingerprint.reachable("pkg.cmd").definitions}

    return make


def command(*body: str, imports: str = "") -> str:
    """A command module: ``imports``, then ``run`` running ``body``."""
    lines = "".join(f"    {line}\n" for line in body)
    return f"{imports}\n\ndef add_arguments(parser):\n    pass\n\n\ndef run(args):\n{lines}"


LIB = {
    "lib/__init__.py": "from pkg.lib.io import read, write\n",
    "lib/io.py": "def read():\n    return _helper()\n\n\ndef _helper():\n    pass\n\n\n"
    "def write():\n    pass\n",
    "lib/text.py": "CONSTANT = 1\n\n\ndef upper():\n    pass\n\n\ndef lower():\n    pass\n",
    "other.py": "def unused():\n    pass\n",
}


def test_names_resolve_through_re_exports_and_module_attributes(make_package):
    reached = make_package(
        {
            **LIB,
            "cmd.py": command(
                "read()",
                "text.upper()",
                "text.CONSTANT",
                imports="from pkg.lib import read\nimport pkg.lib.text as text",
            ),
        }
    )
    assert {"pkg.lib.io:read", "pkg.lib.io:_helper", "pkg.lib.text:upper"} <= reached
    assert not {"pkg.lib.io:write", "pkg.lib.text:lower", "pkg.other:unused"} & reached
    assert {"pkg.cmd:run", "pkg.cmd:add_arguments", "pkg.cli:main"} <= reached


@pytest.mark.parametrize(
    ("body", "whole"),
    [
        ('getattr(text, "up" + "per")()', "text"),
        ("vars(text)", "text"),
        ("text.made_at_runtime()", "text"),
        ('importlib.import_module("pkg.lib.text").upper()', "text"),
        ("importlib.import_module(args.name)", "everything"),
        ('eval("1")', "everything"),
    ],
)
def test_what_cannot_be_resolved_counts_more(make_package, body, whole):
    reached = make_package(
        {**LIB, "cmd.py": command(body, imports="import importlib\nimport pkg.lib.text as text")}
    )
    assert "pkg.lib.text:lower" in reached
    assert ("pkg.other:unused" in reached) == (whole == "everything")


def test_the_command_dispatch_import_counts_only_the_command(make_package):
    dispatch = "import importlib\n\n\ndef main():\n    importlib.import_module(NAME).run(None)\n"
    reached = make_package({**LIB, "cli.py": dispatch, "cmd.py": command("pass")})
    assert "pkg.other:unused" not in reached


SHAPES = """
class Base:
    def area(self):
        return helper()


class Square(Base):
    def side(self):
        pass


class Unused:
    def m(self):
        return never()


def helper():
    pass


def never():
    pass


def registered():
    pass


def at_import():
    return 1


def annotated(shape: Unused) -> Unused:
    pass


REGISTRY = {"r": registered}
VALUE = at_import()
"""


def test_classes_count_whole_and_import_time_code_reaches_what_it_names(make_package):
    reached = make_package(
        {
            "shapes.py": SHAPES,
            "cmd.py": command("Square()", "annotated(None)", imports="from pkg.shapes import *"),
        }
    )
    expected = {"Square", "Base", "helper", "registered", "at_import", "annotated"}
    assert {f"pkg.shapes:{name}" for name in expected} <= reached
    assert not {"pkg.shapes:Unused", "pkg.shapes:never"} & reached  # annotations name types


LOADER = """
def load(path, extra=None, *, meta=None, target=None):
    if meta is not None:
        read_meta()
    if target and path:
        read_target()
    if extra is None:
        return read_table()
    else:
        return read_extra()


def read_meta():
    pass


def read_target():
    pass


def read_table():
    pass


def read_extra():
    pass
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (['load("t")'], {"read_table"}),
        (['load("t", meta="m")'], {"read_table", "read_meta"}),
        (['load("t", "x", target=1)'], {"read_table", "read_extra", "read_target"}),
        (['load("t", **options)'], {"read_table", "read_extra", "read_meta", "read_target"}),
        (["f = load", 'f("t")'], {"read_table", "read_extra", "read_meta", "read_target"}),
        (['load("t")', "other()"], {"read_table", "read_meta"}),
    ],
    ids=["defaults", "meta", "positional", "unpacked", "as-value", "another-caller"],
)
def test_branches_of_parameters_no_call_passes_are_skipped(make_package, body, expected):
    other = "def other():\n    return load('t', meta=1)\n"
    imports = "from pkg.loader import load\n\n\n" + other
    reached = make_package({"loader.py": LOADER, "cmd.py": command(*body, imports=imports)})
    found = {name.partition(":")[2] for name in reached if name.startswith("pkg.loader:")}
    assert found == {"load", *expected}


# --------------------------------------------------------------------------- the real package


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    copy = tmp_path / "aam"
    shutil.copytree(fingerprint.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "PACKAGE_DIR", copy)
    return copy


def fingerprints() -> dict[str, str]:
    return {command: fingerprint.code_fingerprint(module) for command, module in MODULES.items()}


def changed_by(edit, *args) -> set[str]:
    """Commands whose fingerprint ``edit(*args)`` changes."""
    before = fingerprints()
    edit(*args)
    after = fingerprints()
    return {command for command in before if before[command] != after[command]}


def module_path(root: Path, module: str) -> Path:
    """File of ``module`` in the package copy ``root``."""
    parts = module.split(".")[1:]
    path = root.joinpath(*parts).with_suffix(".py")
    return path if path.is_file() else root.joinpath(*parts, "__init__.py")


def edit_body(root: Path, module: str, name: str) -> None:
    """Append a statement to the body of top-level function or class ``name`` of ``module``."""
    path = module_path(root, module)
    lines = path.read_text().splitlines(keepends=True)
    node = next(n for n in ast.parse("".join(lines)).body if getattr(n, "name", None) == name)
    indent = " " * node.body[-1].col_offset
    lines.insert(node.end_lineno, f"{indent}_edited = 1\n")
    path.write_text("".join(lines))


def replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_closure_follows_imports_including_function_level_ones():
    modules = fingerprint.reachable(MODULES["unifrac"]).modules
    assert "aam.unifrac.cpu_kernel" in modules  # imported inside a function of engines.py
    assert "aam.data.table" in modules and "aam.unifrac" in modules and "aam" in modules
    assert not any(m.startswith(("aam.models", "aam.training")) for m in modules)


def test_prediction_code_is_only_reached_by_predict_and_the_search_that_runs_it():
    for command, module in MODULES.items():
        reached = ("aam.analysis.predict", "predict") in fingerprint.reachable(module).definitions
        # a search's trial predicts its fold's held-out samples: its scores depend on predict
        assert reached == (command in ("predict", "search-worker")), command


def test_fingerprints_are_cached_on_disk_until_a_module_changes(package_copy, monkeypatch):
    computed = []
    compute = fingerprint._fingerprint
    monkeypatch.setattr(fingerprint, "_fingerprint", lambda m: computed.append(m) or compute(m))
    first = fingerprint.code_fingerprint(MODULES["split"])
    cache = json.loads((package_copy / fingerprint.CACHE).read_text())
    assert cache["fingerprints"] == {MODULES["split"]: first} and computed == [MODULES["split"]]
    assert fingerprint.code_fingerprint(MODULES["split"]) == first  # read, not computed
    assert computed == [MODULES["split"]]
    path = package_copy / "data" / "split.py"
    path.write_text(path.read_text() + "\n_edited = 1\n")  # any byte: computed again
    assert fingerprint.code_fingerprint(MODULES["split"]) != first
    assert computed == [MODULES["split"]] * 2


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"sources": 1}'])
def test_a_damaged_cache_is_recomputed_and_replaced(package_copy, content):
    expected = fingerprint.code_fingerprint(MODULES["split"])
    (package_copy / fingerprint.CACHE).write_text(content)
    assert fingerprint.code_fingerprint(MODULES["split"]) == expected
    cache = json.loads((package_copy / fingerprint.CACHE).read_text())
    assert cache["fingerprints"] == {MODULES["split"]: expected}


def test_a_read_only_package_computes_without_a_cache(package_copy):
    expected = fingerprint.code_fingerprint(MODULES["split"])
    shutil.rmtree(package_copy / "__pycache__")
    with read_only_dir(package_copy / "__pycache__") as cache_dir:
        assert fingerprint.code_fingerprint(MODULES["split"]) == expected
        assert not list(cache_dir.iterdir())  # nothing written, no temporary left


def test_fingerprint_ignores_comments_and_formatting_but_not_code(package_copy):
    before = fingerprint.code_fingerprint(MODULES["predict"])
    path = package_copy / "models" / "layers.py"
    text = path.read_text()
    path.write_text("# comment\n" + text.replace("1.0 / math.sqrt(dim)", "1.0/math.sqrt(dim)"))
    assert fingerprint.code_fingerprint(MODULES["predict"]) == before
    path.write_text(text.replace("1.0 / math.sqrt(dim)", "2.0 / math.sqrt(dim)"))
    assert fingerprint.code_fingerprint(MODULES["predict"]) != before


@pytest.mark.slow
def test_fingerprint_ignores_docstrings_but_not_other_strings(package_copy):
    before = fingerprint.code_fingerprint(MODULES["predict"])
    path = package_copy / "models" / "layers.py"
    text = path.read_text()
    first = text.index('"""', text.index("def ")) + 3  # inside the first function's docstring
    edited = text[:first] + "Reworded. " + text[first:]
    path.write_text(edited.replace('"""', '"""Reworded module. ', 1))
    assert fingerprint.code_fingerprint(MODULES["predict"]) == before
    default = 'self.attn_implementation = "auto"'  # in code predict runs (not only the profiler's)
    assert default in text
    path.write_text(text.replace(default, default.replace('"auto"', '"math"')))
    assert fingerprint.code_fingerprint(MODULES["predict"]) != before


def reword_docstrings(path: Path) -> None:
    """Prefix every docstring of ``path`` (module, classes, functions) with a word; add
    comments at both ends."""
    lines = path.read_text().splitlines(keepends=True)
    starts = [
        (node.body[0].lineno - 1, node.body[0].col_offset)
        for node in ast.walk(ast.parse("".join(lines)))
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    ]
    for row, col in starts:
        lines[row] = lines[row][: col + 3] + "Reworded. " + lines[row][col + 3 :]
    path.write_text("# a comment\n" + "".join(lines) + "\n# another\n")


@pytest.mark.slow
def test_docstring_and_comment_edits_everywhere_change_no_fingerprint(package_copy):
    def reword_everything():
        for path in package_copy.rglob("*.py"):
            reword_docstrings(path)

    assert changed_by(reword_everything) == set()


@pytest.mark.slow
def test_tokenizer_edit_changes_training_stages_not_unifrac(package_copy):
    changed = changed_by(edit_body, package_copy, "aam.data.tokenize", "tokenize")
    assert TRAINING <= changed and "unifrac" not in changed and "split" in changed


def test_metadata_reader_edit_changes_finetune_and_predict_only(package_copy):
    changed = changed_by(edit_body, package_copy, "aam.data.metadata", "load_metadata")
    assert {"finetune", "predict"} <= changed
    assert not {"unifrac", "pretrain", "tree", "stage"} & changed


@pytest.mark.slow
def test_unifrac_kernel_edit_changes_unifrac_and_the_stages_that_train(package_copy):
    # the default engine ("builtin") on the default device ("cpu"); pretrain, finetune and
    # profile compute each batch's UniFrac with it (--tree) through the same kernel driver
    # (_run), as do the shards of a matrix. Two commands are no rule: run-options-schema uses
    # the pretrain and finetune modules as values, which counts them whole; gpu-check runs the
    # unifrac check (the device's kernels against this one). A search's worker pretrains and
    # fine-tunes in its trials.
    changed = changed_by(edit_body, package_copy, "aam.unifrac.cpu_kernel", "_run")
    stages = {"unifrac", "unifrac-shard", "pretrain", "finetune", "profile", "search-worker"}
    assert changed - {"run-options-schema", "gpu-check"} == stages


@pytest.mark.parametrize(
    ("module", "old", "new", "users"),
    [
        ("aam.training.config", "lr: float = ", "lr: float = 2 * ", TRAINING),
        (
            "aam.models.config",
            "embedding_dim: int = ",
            "embedding_dim: int = 2 * ",
            {*TRAINING, "validate"},
        ),
    ],
    ids=["TrainConfig.lr", "ModelConfig.embedding_dim"],
)
def test_config_default_edit_changes_the_stages_that_use_it(package_copy, module, old, new, users):
    changed = changed_by(replace, module_path(package_copy, module), old, new)
    assert users <= changed and not {"unifrac", "split", "tree", "stage"} & changed


def test_imports_for_type_checking_only_are_not_followed():
    # aam.training.inputs.study names UniFracOptions in an annotation only, imported under
    # TYPE_CHECKING: `aam split` (which loads studies) must not reach the training options.
    assert "aam.training.config" not in fingerprint.reachable(MODULES["split"]).modules
    assert "aam.training.config" in fingerprint.reachable(MODULES["pretrain"]).modules


@pytest.mark.slow
def test_edit_of_an_unreached_function_of_an_imported_module_changes_nothing(package_copy):
    for command in ("unifrac", "split", "pretrain", "predict"):
        found = fingerprint.reachable(MODULES[command])
        package = fingerprint.read_package()
        unreached = sorted(
            (module, name)
            for module in found.modules
            for name, nodes in package.sources[module].definitions.items()
            if (module, name) not in found.definitions and isinstance(nodes[0], ast.FunctionDef)
        )
        assert unreached, command
        before = fingerprint.code_fingerprint(MODULES[command])
        for module, name in unreached[:: max(1, len(unreached) // 3)]:
            edit_body(package_copy, module, name)
            assert fingerprint.code_fingerprint(MODULES[command]) == before, (command, module, name)


def test_unifrac_does_not_reach_the_tokenizer_metadata_or_rarefaction():
    reached = fingerprint.reachable(MODULES["unifrac"])
    assert "aam.data.table" in reached.modules
    for module in ("aam.data.tokenize", "aam.data.metadata", "aam.data.rarefy"):
        assert module not in reached.modules  # aam/data/__init__.py imports none of them


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(MODULES))
def test_editing_any_reached_definition_changes_the_fingerprint(package_copy, command):
    """A sample of what the command reaches (every definition of its own module, every
    thirtieth of the others, from an offset of its own: the commands share most of what they
    reach, so each samples other definitions): appending a statement to it changes the
    fingerprint."""
    reached = sorted(fingerprint.reachable(MODULES[command]).definitions)
    offset = sorted(MODULES).index(command)
    sample = [
        d for k, d in enumerate(reached) if d[0] == MODULES[command] or (k + offset) % 30 == 0
    ]
    before = fingerprint.code_fingerprint(MODULES[command])
    for module, name in sample:
        path = module_path(package_copy, module)
        text = path.read_text()
        edit_body(package_copy, module, name)
        assert fingerprint.code_fingerprint(MODULES[command]) != before, (module, name)
        path.write_text(text)


@pytest.mark.slow
def test_import_time_code_of_an_imported_module_counts(package_copy):
    def add_constant():
        replace(package_copy / "data" / "rarefy.py", "import logging\n", "import logging\nX = 1\n")

    changed = changed_by(add_constant)  # aam.training.inputs.study imports aam.data.rarefy
    assert set(TRAINING) <= changed and "unifrac" not in changed


def test_fingerprints_of_all_commands_take_well_under_a_second():
    import time

    fingerprints()  # the first parse of the package
    start = time.perf_counter()
    fingerprints()
    assert time.perf_counter() - start < 1.0  # cached: a re-parse of the unchanged Snakefile


# --------------------------------------------------------------------------- traced runs


def executed(argv: list[str]) -> set[tuple[str, str]]:
    """(module, top-level definition or "" for module-level code) of every aam code object
    that ``aam argv`` runs in this process."""
    codes = set()

    def record(frame, event, arg):
        if event == "call":
            codes.add(frame.f_code)

    sys.setprofile(record)
    threading.setprofile(record)
    try:
        assert main(argv) == 0
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    found = set()
    for code in codes:
        path = Path(code.co_filename)
        if path.is_relative_to(fingerprint.PACKAGE_DIR):
            parts = ["aam", *path.relative_to(fingerprint.PACKAGE_DIR).with_suffix("").parts]
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            top = code.co_qualname.split(".")[0]
            import_time = top.startswith("<") or not code.co_flags & inspect.CO_OPTIMIZED
            found.add((module, "" if import_time else top))  # a class body runs at import
    return found


def test_everything_a_traced_run_executes_is_reached(tmp_path, small_study, demo_dir):
    """Soundness against a real run: each function that `aam split`, `aam unifrac` and
    `aam pretrain` execute is in what their fingerprint covers."""
    table, tree, metadata = (
        small_study / "table.biom",
        demo_dir / "tree.nwk",
        demo_dir / "metadata.tsv",
    )
    runs = {
        "split": [
            "--table",
            table,
            "--metadata",
            metadata,
            "--target-column",
            "age",
            "--output",
            tmp_path / "split.tsv",
            "--allow-missing-samples",
        ],
        "unifrac": [
            "--table",
            table,
            "--tree",
            tree,
            "--metric",
            "unweighted",
            "--threads",
            "1",
            "--output",
            tmp_path / "u.h5",
            "--no-progress",
        ],
        "pretrain": [
            "--table",
            table,
            "--unifrac",
            small_study / "unifrac.h5",
            "--split",
            tmp_path / "split.tsv",
            "--output-dir",
            tmp_path / "pretrain",
            *"--embedding-dim 8 --attention-heads 2 --layers 1 --max-bp 24".split(),
            *"--token-limit 16 --epochs 1 --batch-size 16 --threads 1".split(),
            "--no-progress",
        ],
    }
    for command, args in runs.items():
        ran = executed([command, *map(str, args)])
        reached = fingerprint.reachable(MODULES[command])
        assert {m for m, name in ran if not name} <= reached.modules, command
        assert {d for d in ran if d[1]} <= reached.definitions, command
        assert ("aam.data.metadata", "load_metadata") in ran or command != "split"
        assert ("aam.data.tokenize", "tokenize") in ran or command == "unifrac"


# --------------------------------------------------------------------------- provenance records


def test_cli_writes_provenance_beside_outputs(tmp_path, demo_dir):
    record_path = tmp_path / "provenance.json"
    argv = [
        "stage",
        "--output-dir",
        str(tmp_path / "out"),
        "--file",
        f"metadata.tsv={demo_dir / 'metadata.tsv'}",
    ]
    assert main(["--provenance", str(record_path), *argv]) == 0
    record = json.loads(record_path.read_text())
    assert record["command"] == ["aam", *argv]
    assert record["code_fingerprint"] == fingerprint.code_fingerprint("aam.commands.stage")
    assert record["git_commit"] is None or len(record["git_commit"]) == 40
    assert {"torch", "device", "host", "started", "finished", "container_image"} <= set(record)


def test_stage_copies_verifies_and_writes_a_manifest(tmp_path, demo_dir):
    out = tmp_path / "staged"
    source = demo_dir / "metadata.tsv"
    assert main(["stage", "--output-dir", str(out), "--file", f"m.tsv={source}"]) == 0
    assert (out / "m.tsv").read_bytes() == source.read_bytes()
    digest, name = (out / "manifest.sha256").read_text().split()
    assert name == "m.tsv" and digest == hashlib.sha256(source.read_bytes()).hexdigest()


def test_stage_missing_input_is_one_line_and_leaves_nothing(tmp_path, capsys):
    out = tmp_path / "staged"
    assert main(["stage", "--output-dir", str(out), "--file", f"t={tmp_path / 'no.biom'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aam stage: error:") and "no.biom" in err and "\n" not in err
    assert not (out / "manifest.sha256").exists()


# --------------------------------------------------------------------------- what a record names


def test_declared_dependencies_are_pyprojects_read_without_tomllib(monkeypatch, tmp_path):
    """The images' python (3.10) has no tomllib: the record reads pyproject.toml's dependencies
    itself, as tomllib reads them; without it beside the package, from aam's metadata."""
    import tomllib

    from aam.workflow import provenance

    declared = tomllib.loads((fingerprint.PACKAGE_DIR.parent / "pyproject.toml").read_text())
    names = [re.match(r"[\w.-]+", d).group() for d in declared["project"]["dependencies"]]
    expected = {provenance.normalized(name): name for name in names}
    assert provenance.declared_dependencies() == expected and "biom-format" in expected
    monkeypatch.setattr(provenance, "PYPROJECT", tmp_path / "absent.toml")
    assert provenance.declared_dependencies() == expected  # the editable install's metadata


def test_a_record_names_the_dependencies_aam_declares_not_theirs(tmp_path):
    """Packages: aam and what pyproject.toml declares, where the job imported it; not what
    those import (matplotlib's cycler, pandas' dateutil, setuptools)."""
    import cycler  # noqa: F401  (matplotlib's)
    import matplotlib  # noqa: F401
    import yaml  # noqa: F401  (snakemake's; aam imports it too, undeclared)

    from aam.workflow.provenance import declared_dependencies, imported_packages

    packages = imported_packages()
    assert packages["aam"] == aam_version() and "matplotlib" in packages
    assert set(packages) - {"aam"} <= set(declared_dependencies().values())
    assert not {"cycler", "python-dateutil", "setuptools", "PyYAML"} & set(packages)
    assert "optuna" not in packages or "optuna" in sys.modules


def aam_version() -> str:
    import aam

    return aam.__version__


def test_a_jobs_record_names_the_snakemake_that_ran_it(tmp_path, monkeypatch):
    """The version job_prefix exports (the running Snakemake's), read in the job; a process
    Snakemake did not start names none."""
    from importlib import metadata

    from aam.runtime.external_tools import SNAKEMAKE_VERSION, tools_ran
    from aam.workflow.snakefile import job_prefix

    prefix = job_prefix(fingerprint.PACKAGE_DIR.parent, None, tmp_path / "cache")
    script = "from aam.runtime.external_tools import tools_ran; print(tools_ran())"
    job = subprocess.run(  # Snakemake formats the prefix (its doubled braces) into the shell
        ["bash", "-c", f"{prefix.format()}python -c {shlex.quote(script)}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert job.stdout.strip() == repr({"snakemake": metadata.version("snakemake")})
    monkeypatch.delenv(SNAKEMAKE_VERSION, raising=False)
    assert "snakemake" not in tools_ran()


def test_a_tool_run_through_its_python_package_is_named_by_the_packages_version(monkeypatch):
    from importlib import metadata

    from aam.runtime import external_tools

    monkeypatch.setattr(external_tools, "TOOLS", {})
    external_tools.record_package("numpy's", "numpy")
    external_tools.record_package("striped-unifrac", "no-such-distribution")
    assert external_tools.tools_ran() == {
        "numpy's": metadata.version("numpy"),
        "striped-unifrac": "unknown",
    }
