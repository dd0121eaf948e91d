"""Who leads and who holds partitions: ElectLeaders (controller/elections.py; an unclean election first asks the
replicas about their logs, controller/unclean_recovery.py) and AlterPartitionReassignments
(controller/reassignment.py), on the active controller."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from odradek.client.common.acls import AclOperation
from odradek.client.common.admin.partitions import (
    AlterReassignments,
    AlterReassignmentsAnswer,
    ElectionResult,
    ElectionType,
    ElectLeaders,
    ElectLeadersAnswer,
)
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.active import ActiveController
from odradek.controller.admin.base import CLUSTER_DENIED, NOT_CONTROLLER, AdminBase, write
from odradek.controller.elections import PartitionOutcome, elect_leaders, every_partition
from odradek.controller.reassignment import ReassignmentRequest, alter_reassignments
from odradek.controller.replica_logs import Answers
from odradek.controller.unclean_recovery import Inspection, Recovery, operator_choice, operator_inspection
from odradek.proto import metadata_pb2 as md

logger = logging.getLogger(__name__)


def election_results(outcomes: Iterable[PartitionOutcome]) -> tuple[ElectionResult, ...]:
    return tuple(ElectionResult(o.topic, o.partition, o.error, o.message, o.leader) for o in outcomes)


class PartitionAdmin(AdminBase):
    @write
    async def elect_leaders(self, request: ElectLeaders, ctx: RequestContext) -> ElectLeadersAnswer:
        """Needs cluster Alter."""
        if self.cluster_denied(ctx, AclOperation.ALTER, "ElectLeaders"):
            return ElectLeadersAnswer(error=CLUSTER_DENIED)
        if request.partitions == ():  # none asked (a request the gRPC wire cannot carry: its empty list is all)
            return ElectLeadersAnswer()
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.elect_leaders(request, ctx)
            return forwarded if forwarded is not None else ElectLeadersAnswer(error=NOT_CONTROLLER)
        if request.election_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
            return ElectLeadersAnswer(error=ErrorCode.INVALID_REQUEST)
        partitions = list(request.partitions) if request.partitions is not None else None
        unclean = request.election_type == ElectionType.UNCLEAN
        min_isr = controller.lifecycle.min_isr
        recovered: list[Recovery] = []
        try:
            inspections, answers = await self._inspect_for_unclean(controller, partitions) if unclean else ([], {})

            def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[PartitionOutcome]]:
                inspected = operator_choice(image, inspections, answers, min_isr, recovered)
                return elect_leaders(image, partitions, unclean=unclean, min_isr=min_isr, inspected=inspected)

            outcomes = await controller.write(decide)
        except OdradekError as e:
            return ElectLeadersAnswer(error=e.code)
        for r in recovered:
            logger.warning("operator's %s", r.describe())
        return ElectLeadersAnswer(results=election_results(outcomes))

    @staticmethod
    async def _inspect_for_unclean(
        controller: ActiveController, partitions: list[tuple[str, int]] | None
    ) -> tuple[list[Inspection], Answers]:
        """The logs of the leaderless partitions' active replicas, for an unclean election to pick the best."""
        image = controller.image
        inspections = []
        for topic, index in partitions if partitions is not None else every_partition(image):
            p = image.partition(topic, index)
            inspection = None if p is None else operator_inspection(image, topic, p)
            if inspection is not None:
                inspections.append(inspection)
        if not inspections:
            return [], {}
        await controller.wait_active(5.0)
        return inspections, await controller.inspector.inspect(image, inspections)

    @write
    async def alter_partition_reassignments(
        self, request: AlterReassignments, ctx: RequestContext
    ) -> AlterReassignmentsAnswer:
        """Needs cluster Alter."""
        if self.cluster_denied(ctx, AclOperation.ALTER, "AlterPartitionReassignments"):
            return AlterReassignmentsAnswer(error=CLUSTER_DENIED)
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.alter_partition_reassignments(request, ctx)
            return forwarded if forwarded is not None else AlterReassignmentsAnswer(error=NOT_CONTROLLER)
        requests = [ReassignmentRequest(r.topic, r.partition, r.replicas or None) for r in request.reassignments]
        unclean_allowed = controller.lifecycle.unclean_allowed
        try:
            outcomes = await controller.write(
                lambda image, _offset: alter_reassignments(image, requests, unclean_allowed)
            )
        except OdradekError as e:
            return AlterReassignmentsAnswer(error=e.code)
        return AlterReassignmentsAnswer(results=election_results(outcomes))
