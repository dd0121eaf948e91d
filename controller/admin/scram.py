"""SCRAM credentials (KIP-554): AlterUserScramCredentials (controller/scram_changes.py on the active controller,
each change in the audit log there, never a key) and DescribeUserScramCredentials (from this node's image: the users
its brokers can authenticate)."""

from __future__ import annotations

from odradek.client.common.acls import AclOperation
from odradek.client.common.admin.scram import (
    AlterScramCredentials,
    AlterScramCredentialsAnswer,
    AlterScramResult,
    DescribeScramCredentials,
    DescribeScramCredentialsAnswer,
    ScramCredentialInfo,
    UserScramCredentials,
)
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import OdradekError
from odradek.controller.admin.acls import audit
from odradek.controller.admin.base import CLUSTER_DENIED, DENIED_MESSAGE, NOT_CONTROLLER, AdminBase, write
from odradek.controller.scram_changes import (
    Deletion,
    Upsertion,
    UserResult,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from odradek.proto import metadata_pb2 as md


class ScramAdmin(AdminBase):
    @write
    async def alter_user_scram_credentials(
        self, request: AlterScramCredentials, ctx: RequestContext
    ) -> AlterScramCredentialsAnswer:
        """Needs cluster Alter."""
        if self.cluster_denied(ctx, AclOperation.ALTER, "AlterUserScramCredentials"):
            return AlterScramCredentialsAnswer(error=CLUSTER_DENIED)
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.alter_user_scram_credentials(request, ctx)
            return forwarded if forwarded is not None else AlterScramCredentialsAnswer(error=NOT_CONTROLLER)
        upsertions = [
            Upsertion(u.user, u.mechanism, u.iterations, u.salt, u.salted_password) for u in request.upsertions
        ]
        deletions = [Deletion(d.user, d.mechanism) for d in request.deletions]

        def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[UserResult]]:
            results = alter_user_scram_credentials(image, upsertions, deletions)
            return [r for out in results for r in out.records], results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return AlterScramCredentialsAnswer(error=e.code)
        for out in results:
            for record in out.records:
                kind = str(record.WhichOneof("record"))
                change = getattr(record, kind)
                verb = "set" if kind == "user_scram_credential" else "deleted"
                audit.info("SCRAM credential %s: user %r, %s", verb, change.name, change.mechanism)
        return AlterScramCredentialsAnswer(
            results=tuple(
                AlterScramResult(user=out.user, error=out.error, error_message=out.message) for out in results
            )
        )

    async def describe_user_scram_credentials(
        self, request: DescribeScramCredentials, ctx: RequestContext
    ) -> DescribeScramCredentialsAnswer:
        """From this node's own image: the users this node's brokers can authenticate, never their keys. Needs
        cluster Describe."""
        if self.cluster_denied(ctx, AclOperation.DESCRIBE, "DescribeUserScramCredentials"):
            return DescribeScramCredentialsAnswer(error=CLUSTER_DENIED, error_message=DENIED_MESSAGE)
        found = describe_user_scram_credentials(self.sm.image, list(request.users))
        return DescribeScramCredentialsAnswer(
            results=tuple(
                UserScramCredentials(
                    user=d.user,
                    error=d.error,
                    error_message=d.message,
                    credentials=tuple(ScramCredentialInfo(m, i) for m, i in d.credentials),
                )
                for d in found
            )
        )
