"""End-to-end tests against a real kube-apiserver (see conftest.py)."""
