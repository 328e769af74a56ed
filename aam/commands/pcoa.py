"""`aam pcoa`: PCoA of a UniFrac matrix (a plot coloured by a metadata column) and the files
QIIME 2 imports: the ordination and the matrix as an lsmat TSV (``aam.analysis.ordination``)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from aam.analysis.figures import title
from aam.analysis.ordination import ordinate, plot_ordination, write_lsmat, write_ordination
from aam.data.metadata import column_hint, load_metadata
from aam.errors import InputError
from aam.options import add_options, check_options, from_args, option
from aam.runtime.atomic import check_output_dir
from aam.runtime.figures import add_format_argument, figure_name
from aam.unifrac.io import read_distance_matrix

log = logging.getLogger(__name__)


@dataclass
class PcoaOptions:
    """The options of `aam pcoa` but --figure-format (``add_format_argument``, shared by the
    commands that draw figures); --metadata and --color-column go together."""

    matrix: Path = option(None, "`aam unifrac` matrix", required=True)
    output_dir: Path = option(
        None, "pcoa.<figure format>, ordination.txt and distance-matrix.tsv (lsmat)", required=True
    )
    metadata: Path | None = option(None, "sample metadata TSV (colours)")
    color_column: str | None = option(None, "metadata column the points are coloured by")
    dataset: str | None = option(None, "the dataset's name, for the title")
    metric: str | None = option(None, "the UniFrac metric of the matrix, for the title")

    def __post_init__(self) -> None:
        check_options(self)
        if (self.metadata is None) != (self.color_column is None):
            raise InputError("--metadata and --color-column: give both or neither")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `aam pcoa`."""
    add_options(parser, PcoaOptions)
    add_format_argument(parser)


def run(args: argparse.Namespace) -> None:
    """Ordinate the matrix; write the plot, the ordination and the lsmat TSV."""
    opts = from_args(PcoaOptions, args)
    out_dir = check_output_dir(opts.output_dir, "output")
    ids, matrix = read_distance_matrix(opts.matrix)
    if len(ids) < 3:
        raise InputError(f"{opts.matrix}: {len(ids)} samples; a PCoA needs at least 3")
    groups = None
    if opts.metadata is not None:
        metadata = load_metadata(opts.metadata)
        if opts.color_column not in metadata.columns:
            raise InputError(
                f"{opts.metadata}: no column {opts.color_column!r} for --color-column "
                f"({column_hint(opts.color_column, metadata.columns)})"
            )
        groups = metadata[opts.color_column].astype("string")
    result = ordinate(ids, matrix)
    metric = f"{opts.metric} UniFrac" if opts.metric else "UniFrac"
    what = f"PCoA of the {metric} distances ({len(ids)} samples)"
    plot = out_dir / figure_name("pcoa", args.figure_format)
    plot_ordination(plot, result, groups, title(what, opts.dataset))
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
