"""Running odradek clusters. On VMs, one node per VM: the cluster description and per-node config generator
(``cluster.py``), its config templates (``config/``), and, outside the package, systemd units, ``install.sh`` and
Ansible playbooks (docs/deploy.md); ``vms.py`` rehearses that on one machine. Locally, real processes on 127.0.0.1
(``local.py``, which ``odradek dev``, the chaos harness and tests use) and the ``odradek_cluster`` pytest fixture on
it (``pytest_plugin.py``, docs/testing.md); ``process.py`` holds how any of them runs a node process."""
