"""Subcommands of the `dse` console script."""
