"""Client quotas (KIP-546): AlterClientQuotas (controller/client_quotas.py on the active controller) and
DescribeClientQuotas (from this node's image: what this node's brokers enforce)."""

from __future__ import annotations

from typing import Literal

from odradek.client.common.acls import AclOperation
from odradek.client.common.admin.quotas import (
    AlterClientQuotas,
    AlterClientQuotasAnswer,
    ClientQuotaEntry,
    DescribeClientQuotas,
    DescribeClientQuotasAnswer,
    EntityComponent,
    QuotaAlterationResult,
    QuotaMatch,
)
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import OdradekError
from odradek.controller.admin.base import CLUSTER_DENIED, DENIED_MESSAGE, NOT_CONTROLLER, AdminBase, write
from odradek.controller.client_quotas import (
    Alteration,
    AlterResult,
    Component,
    FilterComponent,
    QuotaOp,
    alter_client_quotas,
    components_of,
    describe_client_quotas,
)
from odradek.proto import metadata_pb2 as md

_MATCHES: dict[QuotaMatch, Literal["exact", "default", "any"]] = {
    QuotaMatch.EXACT: "exact",
    QuotaMatch.DEFAULT: "default",
    QuotaMatch.ANY: "any",
}


class QuotaAdmin(AdminBase):
    @write
    async def alter_client_quotas(self, request: AlterClientQuotas, ctx: RequestContext) -> AlterClientQuotasAnswer:
        """Needs cluster AlterConfigs."""
        if self.cluster_denied(ctx, AclOperation.ALTER_CONFIGS, "AlterClientQuotas"):
            return AlterClientQuotasAnswer(error=CLUSTER_DENIED)
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.alter_client_quotas(request, ctx)
            return forwarded if forwarded is not None else AlterClientQuotasAnswer(error=NOT_CONTROLLER)
        alterations = [
            Alteration(
                [Component(c.entity_type, c.name) for c in entry.entity],
                [QuotaOp(op.key, op.value, op.remove) for op in entry.ops],
            )
            for entry in request.entries
        ]

        def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[AlterResult]]:
            results = alter_client_quotas(image, alterations)
            records = [] if request.validate_only else [r for out in results for r in out.records]
            return records, results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return AlterClientQuotasAnswer(error=e.code)
        return AlterClientQuotasAnswer(
            entries=tuple(QuotaAlterationResult(error=out.error, error_message=out.message) for out in results)
        )

    async def describe_client_quotas(
        self, request: DescribeClientQuotas, ctx: RequestContext
    ) -> DescribeClientQuotasAnswer:
        """From this node's own image: what this node's brokers enforce. Needs cluster DescribeConfigs."""
        if self.cluster_denied(ctx, AclOperation.DESCRIBE_CONFIGS, "DescribeClientQuotas"):
            return DescribeClientQuotasAnswer(error=CLUSTER_DENIED, error_message=DENIED_MESSAGE)
        filters = [FilterComponent(c.entity_type, _MATCHES[c.match_type], c.match) for c in request.components]
        try:
            found = describe_client_quotas(self.sm.image.client_quotas, filters, request.strict)
        except OdradekError as e:
            return DescribeClientQuotasAnswer(error=e.code, error_message=str(e))
        return DescribeClientQuotasAnswer(
            entries=tuple(
                ClientQuotaEntry(
                    entity=tuple(EntityComponent(c.entity_type, c.name) for c in components_of(entity)),
                    values=tuple(sorted(values.items())),
                )
                for entity, values in found
            )
        )
