"""overlay-lint: the command-line adapter of the simulation core (loading files with positions,
output formats, the CLI)."""
