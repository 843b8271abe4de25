"""webhook."""
