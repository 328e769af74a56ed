"""The search's costs (docs: docs/experiments.md, "Search").

``overhead``: what the shared study costs a trial beside its training: N processes each run
``aam.analysis.search``'s ask-under-lock / tell loop with an instant objective on one journal
file until the budget is used; prints seconds per trial (wall time x processes / trials) and
checks that the trials are exactly the budget, none lost, none run twice.

``trials``: trials per hour of the real workers: ``aam search-worker`` x W processes on one
study of the bundled demo (its split and K scoring folds made first with `aam split`), a small
model and a few epochs; prints trials/hour and the mean seconds of a trial.

    python benchmarks/search.py overhead --workers 1 8 --budget 200
    python benchmarks/search.py trials --workers 1 2 --budget 6
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aam.analysis import search  # noqa: E402

DEMO = REPO / "data/demo"


def _worker(directory: str, budget: int, label: str) -> list[int]:
    """Trials of an instant objective until the budget is used: their numbers."""
    directory = Path(directory)
    study = search.open_study(directory, "bench", "minimize", seed=len(label))
    worker, ran = search.Worker(directory, label), []
    with worker.alive():
        while True:
            trial = search.ask_within_budget(study, budget, worker, directory, directory)
            if trial is None:
                return ran
            x = trial.suggest_float("x", -1.0, 1.0)
            study.tell(trial, x * x)
            ran.append(trial.number)


def overhead(workers: list[int], budget: int) -> None:
    """Seconds of study overhead per trial with each number of concurrent workers."""
    print("| workers | trials | wall (s) | overhead per trial (s) | lost | duplicated |")
    print("|---|---|---|---|---|---|")
    for n in workers:
        with tempfile.TemporaryDirectory() as tmp:
            search.open_study(Path(tmp), "bench", "minimize", seed=0)
            started = time.perf_counter()
            with multiprocessing.get_context("spawn").Pool(n) as pool:
                runs = pool.starmap(_worker, [(tmp, budget, f"w{k}") for k in range(n)])
            wall = time.perf_counter() - started
        numbers = [k for ran in runs for k in ran]
        lost = len(set(range(budget)) - set(numbers))
        twice = len(numbers) - len(set(numbers))
        print(f"| {n} | {len(numbers)} | {wall:.1f} | {wall * n / budget:.3f} | {lost} | {twice} |")


def _folds(tmp: Path, folds: int) -> tuple[Path, list[Path]]:
    """The demo's split and ``folds`` scoring folds of its train and val samples."""
    aam = [sys.executable, "-m", "aam", "split", "--table", str(DEMO / "table.biom")]
    meta = ["--metadata", str(DEMO / "metadata.tsv"), "--target-column", "age"]
    split = tmp / "split.tsv"
    subprocess.run([*aam, *meta, "--output", str(split)], check=True, capture_output=True)
    paths = []
    for k in range(1, folds + 1):
        path = tmp / f"fold{k}.tsv"
        given = ["--from-file", str(split), "--folds", str(folds), "--fold", str(k)]
        subprocess.run(
            [*aam, *meta, *given, "--output", str(path)], check=True, capture_output=True
        )
        paths.append(path)
    return split, paths


def trials(workers: list[int], budget: int, epochs: int, folds: int, threads: int) -> None:
    """Trials per hour of ``aam search-worker`` processes sharing one study of the demo."""
    model = {"embedding_dim": 32, "attention_heads": 4, "layers": 2, "max_bp": 100}
    spec = {
        "key": "bench",
        "studies": {"aam": "aam-bench", "forest": "forest-bench"},
        "trials": budget,
        "seed": 0,
        "folds": folds,
        "metric": "mae",
        "direction": "minimize",
        "forest": None,
        "target": "age",
        "classifier": False,
        "space": {"finetune.lr": {"low": 3e-4, "high": 1e-2, "log": True, "integer": False}},
        "pretrain": None,
        "finetune": {
            **model,
            "token_limit": 256,
            "epochs": epochs,
            "batch_size": 16,
            "target_column": "age",
            "stale_checkpoints": "restart",
        },
    }
    print("| workers | threads each | trials | wall (s) | trials per hour | mean trial (s) |")
    print("|---|---|---|---|---|---|")
    for n in workers:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            split, paths = _folds(tmp, folds)
            cmd = [
                sys.executable,
                "-m",
                "aam",
                "search-worker",
                "--table",
                str(DEMO / "table.biom"),
            ]
            cmd += ["--metadata", str(DEMO / "metadata.tsv"), "--tree", str(DEMO / "tree.nwk")]
            cmd += [
                "--split",
                str(split),
                "--folds",
                *map(str, paths),
                "--search-dir",
                str(tmp / "s"),
            ]
            cmd += ["--spec", json.dumps(spec), "--threads", str(threads)]
            started = time.perf_counter()
            procs = [
                subprocess.Popen(
                    [*cmd, "--worker", str(k), "--output", str(tmp / f"w{k}.json")],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for k in range(1, n + 1)
            ]
            codes = [p.wait() for p in procs]
            wall = time.perf_counter() - started
            if any(codes):
                raise SystemExit(f"a worker failed: exit codes {codes}")
            study = search.load_study(tmp / "s", json.loads((tmp / "w1.json").read_text())["study"])
            seconds = [
                t.user_attrs["seconds"] for t in study.get_trials() if "seconds" in t.user_attrs
            ]
        mean, per_hour = sum(seconds) / len(seconds), len(seconds) * 3600 / wall
        print(f"| {n} | {threads} | {len(seconds)} | {wall:.0f} | {per_hour:.0f} | {mean:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["overhead", "trials"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=4, help="trials: fine-tuning epochs")
    parser.add_argument("--folds", type=int, default=3, help="trials: scoring folds")
    parser.add_argument("--threads", type=int, default=1, help="trials: threads per worker")
    args = parser.parse_args()
    if args.what == "overhead":
        overhead(args.workers, args.budget)
    else:
        trials(args.workers, args.budget, args.epochs, args.folds, args.threads)


if __name__ == "__main__":
    main()
