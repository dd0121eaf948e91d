"""ACLs: CreateAcls and DeleteAcls (controller/acl_changes.py on the active controller, each change in the audit
log there) and DescribeAcls (from this node's image: the bindings its authorizer holds)."""

from __future__ import annotations

import logging

from odradek.client.common.acls import AclBinding, AclOperation
from odradek.client.common.admin.acls import (
    AclCreationResult,
    AclDeletionResult,
    CreateAcls,
    CreateAclsAnswer,
    DeleteAcls,
    DeleteAclsAnswer,
    DescribeAcls,
    DescribeAclsAnswer,
)
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import OdradekError
from odradek.controller.acl_changes import CreateResult, DeleteResult, create_acls, delete_acls, describe_acls
from odradek.controller.admin.base import CLUSTER_DENIED, DENIED_MESSAGE, NOT_CONTROLLER, AdminBase, write
from odradek.proto import metadata_pb2 as md

# ACL and credential changes, one line each, on the controller that commits them.
audit = logging.getLogger("odradek.audit")


def describe_binding(b: AclBinding) -> str:
    """A binding in one line for the audit log, in kafka-acls.sh's words."""
    return (
        f"{b.permission.display_name} {b.principal} {b.operation.display_name} from host {b.host} on"
        f" {b.resource_type.display_name}:{b.pattern_type.name}:{b.resource_name}"
    )


class AclAdmin(AdminBase):
    @write
    async def create_acls(self, request: CreateAcls, ctx: RequestContext) -> CreateAclsAnswer:
        """Needs cluster Alter."""
        if self.cluster_denied(ctx, AclOperation.ALTER, "CreateAcls"):
            return CreateAclsAnswer(error=CLUSTER_DENIED)
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.create_acls(request, ctx)
            return forwarded if forwarded is not None else CreateAclsAnswer(error=NOT_CONTROLLER)
        bindings = list(request.creations)

        def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[CreateResult]]:
            results = create_acls(image, bindings)
            return [r for out in results for r in out.records], results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return CreateAclsAnswer(error=e.code)
        for binding, out in zip(bindings, results):
            if out.records:
                audit.info("ACL created: %s", describe_binding(binding))
        return CreateAclsAnswer(
            results=tuple(AclCreationResult(error=out.error, error_message=out.message) for out in results)
        )

    async def describe_acls(self, request: DescribeAcls, ctx: RequestContext) -> DescribeAclsAnswer:
        """From this node's own image: the bindings this node's authorizer holds. Needs cluster Describe."""
        if self.cluster_denied(ctx, AclOperation.DESCRIBE, "DescribeAcls"):
            return DescribeAclsAnswer(error=CLUSTER_DENIED, error_message=DENIED_MESSAGE)
        try:
            found = describe_acls(self.sm.image, request.filter)
        except OdradekError as e:
            return DescribeAclsAnswer(error=e.code, error_message=str(e))
        return DescribeAclsAnswer(bindings=tuple(found))

    @write
    async def delete_acls(self, request: DeleteAcls, ctx: RequestContext) -> DeleteAclsAnswer:
        """Needs cluster Alter."""
        if self.cluster_denied(ctx, AclOperation.ALTER, "DeleteAcls"):
            return DeleteAclsAnswer(error=CLUSTER_DENIED)
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.delete_acls(request, ctx)
            return forwarded if forwarded is not None else DeleteAclsAnswer(error=NOT_CONTROLLER)
        filters = list(request.filters)

        def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[DeleteResult]]:
            results = delete_acls(image, filters)
            return [r for out in results for r in out.records], results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return DeleteAclsAnswer(error=e.code)
        for out in results:
            for binding in out.deleted:
                audit.info("ACL deleted: %s", describe_binding(binding))
        return DeleteAclsAnswer(
            results=tuple(
                AclDeletionResult(error=out.error, error_message=out.message, deleted=tuple(out.deleted))
                for out in results
            )
        )
