"""The pure simulation core of overlay-guard: data in, findings out."""
