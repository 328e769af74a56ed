"""Sharded UniFrac: K jobs each compute a row block of the matrix; one gather merges them.

Shard k of K owns the rows ``start..stop-1`` (balanced by pairs ``i < j``, not by rows) and
computes their distances to the samples ``start..N-1`` with the single job's own kernel and
formula (``block_pair_sums``, ``upper_distances``), so the merged matrix is bit-identical to
``aam unifrac``'s. A shard holds ``(stop - start) x (N - start)`` values, never N x N. Its
partial file (HDF5) keeps the block, the sample order, and the settings a merge checks: the
table's and the tree's sha256, the metric, alpha, dtype, tip handling and K.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import h5py
import numpy as np

from aam.data.table import Counts, counts_of
from aam.errors import InputError
from aam.runtime.atomic import atomic_output
from aam.unifrac.abundance import node_abundance
from aam.unifrac.cpu_kernel import block_pair_sums
from aam.unifrac.engines import checked_tree_arrays
from aam.unifrac.io import hdf5_bytes
from aam.unifrac.metrics import sample_totals, upper_distances
from aam.unifrac.pair_sums import DEFAULT_ALPHA, SUM_FOR_METRIC
from aam.unifrac.shard_plan import check_shard_count, shard_bounds, shard_rows
from aam.unifrac.tree import TreeArrays

if TYPE_CHECKING:
    import biom
    import skbio

FORMAT = "aam unifrac-shard 1"  # the `format` attribute of every partial file
_FIX = "recompute it with `aam unifrac-shard`"


@dataclass(frozen=True)
class ShardSpec:
    """What every shard of one matrix shares; a partial file that differs is refused."""

    table_sha256: str
    tree_sha256: str
    metric: str
    alpha: float | None  # generalized UniFrac only
    dtype: str
    prune_missing: bool
    midpoint_root: bool
    shards: int


@dataclass(frozen=True)
class Shard:
    """Rows ``start..stop-1`` against samples ``start..N-1``; ``block[i, j]`` is the distance
    of samples ``start + i`` and ``start + j`` for ``j > i``, 0 elsewhere."""

    spec: ShardSpec
    index: int  # 1..spec.shards
    start: int
    stop: int
    ids: list[str]
    block: np.ndarray


class _Header(NamedTuple):
    """A partial file's settings, place and sample order (its block is read last)."""

    path: Path
    spec: ShardSpec
    index: int
    start: int
    stop: int
    ids: list[str]


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def compute_shard(
    table: Counts | biom.Table,
    tree: TreeArrays | skbio.TreeNode,
    spec: ShardSpec,
    shard: int,
    *,
    alpha: float = DEFAULT_ALPHA,
    threads: int | None = None,
    progress: bool = False,
    table_name: str = "table",
    tree_name: str = "tree",
) -> Shard:
    """Shard ``shard`` of ``spec.shards`` of ``spec.metric`` on the built-in CPU engine, with
    the inputs and input checks of ``compute_unifrac``."""
    check_shard_count(spec.shards, table.shape[1], f"--shards {spec.shards} ({table_name})")
    if not 1 <= shard <= spec.shards:
        raise InputError(f"--shard {shard}: choose a shard from 1 to {spec.shards} (--shards)")
    dtype = np.dtype(spec.dtype).type
    table = counts_of(table)
    arrays = checked_tree_arrays(table, tree, [spec.metric], alpha, dtype, table_name, tree_name)
    ids = table.sample_ids
    abundance = node_abundance(
        table.matrix,
        table.observation_ids,
        ids,
        arrays,
        prune_missing=spec.prune_missing,
        table_name=table_name,
        tree_name=tree_name,
    )
    start, stop = shard_rows(len(ids), shard, spec.shards)
    sums = block_pair_sums(
        abundance.proportions,
        abundance.lengths,
        {SUM_FOR_METRIC[spec.metric]},
        start,
        stop,
        alpha=alpha,
        dtype=dtype,
        threads=threads,
        progress=progress,
    )
    totals = sample_totals(spec.metric, abundance, alpha)
    block = upper_distances(spec.metric, totals, sums, start, reuse=True)
    return Shard(spec, shard, start, stop, ids, block)


def write_shard(path: str | Path, shard: Shard) -> None:
    """Write a partial file atomically (datasets ``block`` and ``order``, settings as attrs)."""
    need = hdf5_bytes(shard.ids, shard.block)
    with atomic_output(path, what="UniFrac shard", need=need) as tmp, h5py.File(tmp, "w") as h5:
        h5.create_dataset("block", data=shard.block)
        h5.create_dataset("order", data=np.array(shard.ids, dtype=h5py.string_dtype()))
        attrs = {"format": FORMAT, "shard": shard.index, "start": shard.start, "stop": shard.stop}
        spec = {key: value for key, value in asdict(shard.spec).items() if value is not None}
        h5.attrs.update({**attrs, **spec})
        h5.flush()  # a write error (a full disk) raises here, not lost in the close


def gather(paths: Sequence[str | Path], expected: ShardSpec) -> tuple[list[str], np.ndarray]:
    """The N x N matrix from the partial files of every shard of ``expected``. A file with
    other settings, an inconsistent or corrupt file, and a missing or duplicated shard raise
    InputError; every file is checked before any block is read."""
    headers = [_read_header(Path(path)) for path in paths]
    n = len(headers[0].ids)
    check_shard_count(expected.shards, n, f"--shards {expected.shards}")
    bounds = shard_bounds(n, expected.shards)
    by_index: dict[int, Path] = {}
    for header in headers:
        path, index = header.path, header.index
        _check_spec(header, expected)
        if header.ids != headers[0].ids:
            raise InputError(
                f"{path}: its sample order differs from {headers[0].path}'s; all shards of a "
                f"matrix come from one table: {_FIX}"
            )
        rows = (header.start, header.stop)
        if not 1 <= index <= expected.shards or rows != tuple(bounds[index - 1 : index + 1]):
            raise InputError(
                f"{path}: shard {index} of {expected.shards} with rows {rows[0]}..{rows[1] - 1} "
                f"does not match the split of {n} samples into {expected.shards}; {_FIX}"
            )
        if index in by_index:
            raise InputError(
                f"{by_index[index]} and {path} are both shard {index} of {expected.shards}; "
                "give each shard's partial file once"
            )
        by_index[index] = path
    missing = [k for k in range(1, expected.shards + 1) if k not in by_index]
    if missing:
        listed = ", ".join(map(str, missing))
        raise InputError(
            f"shard(s) {listed} of {expected.shards} missing (no partial file given); compute "
            f"each (`aam unifrac-shard --shard {missing[0]} --shards {expected.shards}` ...) "
            "and pass every shard's file"
        )
    ids = headers[0].ids
    matrix = np.zeros((len(ids), len(ids)), dtype=expected.dtype)
    for header in headers:
        start, stop = header.start, header.stop
        _place(matrix, start, stop, _read_block(header.path, (stop - start, len(ids) - start)))
    return ids, matrix


def _place(matrix: np.ndarray, start: int, stop: int, block: np.ndarray) -> None:
    """Copy a shard's pairs and their mirror images into ``matrix`` (copies, no arithmetic)."""
    rows = stop - start
    matrix[start:stop, stop:] = block[:, rows:]
    matrix[stop:, start:stop] = block[:, rows:].T
    corner = block[:, :rows]
    upper = np.triu(np.ones((rows, rows), dtype=bool), 1)
    mirrored = np.where(upper, corner, corner.T)
    np.fill_diagonal(mirrored, 0.0)
    matrix[start:stop, start:stop] = mirrored


def _read_header(path: Path) -> _Header:
    if not path.is_file():
        raise InputError(f"{path}: partial UniFrac file not found; run `aam unifrac-shard`")
    if not h5py.is_hdf5(path):
        raise InputError(f"{path}: not an HDF5 file; {_FIX}")
    try:
        with h5py.File(path, "r") as h5:
            attrs = dict(h5.attrs)
            if attrs.get("format") != FORMAT or "block" not in h5 or "order" not in h5:
                raise InputError(
                    f"{path}: not a partial UniFrac file of this version ({FORMAT!r}); {_FIX}"
                )
            ids = [x.decode() if isinstance(x, bytes) else str(x) for x in h5["order"][()]]
        values = {f.name: attrs.get(f.name) for f in fields(ShardSpec)}
        spec = ShardSpec(**{k: v.item() if hasattr(v, "item") else v for k, v in values.items()})
        return _Header(
            path, spec, int(attrs["shard"]), int(attrs["start"]), int(attrs["stop"]), ids
        )
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InputError(f"{path}: corrupt or truncated partial file ({reason}); {_FIX}") from err


def _check_spec(header: _Header, expected: ShardSpec) -> None:
    """The partial file's settings are ``expected``; else an error naming the first that
    differs by its flag."""
    for field in fields(ShardSpec):
        got, want = getattr(header.spec, field.name), getattr(expected, field.name)
        if got == want:
            continue
        if field.name.endswith("_sha256"):
            flag = "--" + field.name.removesuffix("_sha256")
            differs = f"from another {flag} (sha256 {str(got)[:12]}..., not {want[:12]}...)"
        else:
            flag = "--" + field.name.replace("_", "-")
            differs = f"with {flag} {'none' if got is None else got}, not {want}"
        raise InputError(
            f"{header.path}: shard {header.index} was computed {differs}; "
            f"{_FIX} with the same inputs and flags as the other shards"
        )


def _read_block(path: Path, shape: tuple[int, int]) -> np.ndarray:
    try:
        with h5py.File(path, "r") as h5:
            block = h5["block"][()]
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())
        raise InputError(f"{path}: corrupt or truncated partial file ({reason}); {_FIX}") from err
    if block.shape != shape:
        raise InputError(f"{path}: block is {block.shape}, expected {shape}; {_FIX}")
    return block
