"""Object validation, one NodeOverlay at a time: what the API server rejects (the CRD's schema and CEL rules),
what Karpenter's runtime validation ignores, and shapes from the first RFC."""
