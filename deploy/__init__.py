"""Deployment on VMs, one node per VM: the cluster description and per-node config generator (``cluster.py``),
its config templates (``config/``), and, outside the package, systemd units, ``install.sh`` and Ansible playbooks
(docs/deploy.md)."""
