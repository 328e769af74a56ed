"""`aam` subcommands that drive training: split, pretrain, train, predict."""
