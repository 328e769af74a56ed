"""`aam pcoa`: PCoA of a UniFrac matrix (a plot coloured by a metadata column) and the files
QIIME 2 imports: the ordination and the matrix as an lsmat TSV (``aam.analysis.ordination``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from aam.analysis.figures import title
from aam.analysis.ordination import ordinate, plot_ordination, write_lsmat, write_ordination
from aam.data.metadata import column_hint, load_metadata
from aam.errors import InputError
from aam.runtime.atomic import check_output_dir
from aam.runtime.figures import add_format_argument, figure_name
from aam.unifrac.io import read_distance_matrix

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam pcoa`."""
    parser.add_argument("--matrix", required=True, type=Path, help="`aam unifrac` matrix")
    parser.add_argument(
        "--output-dir",
        required=True,
        type=Path,
        help="pcoa.<figure format>, ordination.txt and distance-matrix.tsv (lsmat)",
    )
    parser.add_argument("--metadata", type=Path, help="sample metadata TSV (colours)")
    parser.add_argument("--color-column", help="metadata column the points are coloured by")
    parser.add_argument("--dataset", help="the dataset's name, for the title")
    parser.add_argument("--metric", help="the UniFrac metric of the matrix, for the title")
    add_format_argument(parser)


def run(args: argparse.Namespace) -> None:
    """Ordinate the matrix; write the plot, the ordination and the lsmat TSV."""
    if (args.metadata is None) != (args.color_column is None):
        raise InputError("--metadata and --color-column: give both or neither")
    out_dir = check_output_dir(args.output_dir, "output")
    ids, matrix = read_distance_matrix(args.matrix)
    if len(ids) < 3:
        raise InputError(f"{args.matrix}: {len(ids)} samples; a PCoA needs at least 3")
    groups = None
    if args.metadata is not None:
        metadata = load_metadata(args.metadata)
        if args.color_column not in metadata.columns:
            raise InputError(
                f"{args.metadata}: no column {args.color_column!r} for --color-column "
                f"({column_hint(args.color_column, metadata.columns)})"
            )
        groups = metadata[args.color_column].astype("string")
    result = ordinate(ids, matrix)
    metric = f"{args.metric} UniFrac" if args.metric else "UniFrac"
    what = f"PCoA of the {metric} distances ({len(ids)} samples)"
    plot = out_dir / figure_name("pcoa", args.figure_format)
    plot_ordination(plot, result, groups, title(what, args.dataset))
    write_ordination(out_dir / "ordination.txt", result)
    write_lsmat(out_dir / "distance-matrix.tsv", ids, matrix)
    explained = result.proportion_explained
    log.info(
        "%s: %d samples; PC1 %.1f%%, PC2 %.1f%% of the variance",
        out_dir,
        len(ids),
        100 * explained.iloc[0],
        100 * explained.iloc[1],
    )
