"""Karpenter's semantics: requirements, quantities, the catalog, the cells an overlay matches and the merge."""
