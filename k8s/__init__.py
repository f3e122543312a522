"""Kubernetes manifests for PageSight on KubeRay, and their offline checks (validate.py)."""
