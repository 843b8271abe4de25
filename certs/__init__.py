"""certs."""
