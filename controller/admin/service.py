"""``NodeAdmin``: the admin service of one node, its areas composed (``topics``, ``configs``, ``partitions``,
``cluster``, ``quotas``, ``acls``, ``scram``, each over ``base.AdminBase``). It implements
``client/common/admin/api.py``'s ``AdminApi``: the gRPC Admin servicer (``grpc_adapter.py``), the Kafka listener's
handlers and the automatic topic creation call it, each with the caller's ``RequestContext``."""

from __future__ import annotations

from odradek.controller.admin.acls import AclAdmin
from odradek.controller.admin.cluster import ClusterAdmin
from odradek.controller.admin.configs import ConfigAdmin
from odradek.controller.admin.partitions import PartitionAdmin
from odradek.controller.admin.quotas import QuotaAdmin
from odradek.controller.admin.scram import ScramAdmin
from odradek.controller.admin.topics import TopicAdmin


class NodeAdmin(TopicAdmin, ConfigAdmin, PartitionAdmin, ClusterAdmin, QuotaAdmin, AclAdmin, ScramAdmin):
    """Reads from this node's metadata image; writes decided and committed here while this node is the active
    controller, else forwarded to it (see ``base.AdminBase`` and ``forwarding.py``)."""
