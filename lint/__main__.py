"""`python -m lint`."""

from lint.cli import entrypoint

entrypoint()
