"""What a run's results mean: baselines fitted on the same training samples, prediction tables
and their plots, ASV importance, cross-validation folds, learning curves, ordination, how
another study differs from the training samples, and the report's front page."""
