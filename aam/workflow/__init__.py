"""What the Snakefile needs, one job per module: ``plan`` (the config as runs, images, layouts
and checks; one PlanError), ``config`` (fold and sweep expansion, shell-quoted flags),
``checks`` (the config's pre-flight checks, at parse time), ``dataset_checks`` (the data's,
in each dataset's check_data job), ``launch`` (how a training job starts its processes on
SLURM), ``containers`` (image names, ``.def`` lint), ``fingerprint`` (each rule's code
hash), ``flags`` (each rule's `aam` flags) and ``rules`` (what every rule shares, the report's
entries, the targets of rule all). Importing ``plan`` imports no torch: the Snakefile parses on
login nodes."""
