"""TxnOffsetCommit (key 28): offsets committed as part of a producer's transaction (exactly-once, KIP-98).

A consume-transform-produce application sends its consumer's positions here, between AddOffsetsToTxn and
EndTxn, so that they commit or abort together with what it produced. The group coordinator appends them to the
group's `__consumer_offsets` partition as one transactional batch of the producer (acks=all, like
OffsetCommit); they stay invisible to OffsetFetch until the transaction's marker is written there.

- Validation as OffsetCommit: coordinator errors, UNKNOWN_TOPIC_OR_PARTITION for partitions of unknown topics,
  OFFSET_METADATA_TOO_LARGE. The group is created if absent (a "simple" commit), as Kafka does.
- v3 adds the consumer's generation, member id and instance id (KIP-447): a member must be current
  (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; for a KIP-848 group the generation is the member
  epoch, and a stale one is ILLEGAL_GENERATION, which these clients understand). Generation -1 without a member
  commits for a classic group in any state.
- The producer's first commit of a transaction to the group's partition is checked with the transaction
  coordinator first (KIP-890, `transaction.partition.verification.enable`): a partition AddOffsetsToTxn did
  not add gets INVALID_TXN_STATE; an unreachable transaction coordinator COORDINATOR_NOT_AVAILABLE (retried).
- A fenced producer (an older epoch than the log knows) gets INVALID_PRODUCER_EPOCH, which clients treat as
  fatal; INVALID_TXN_STATE and INVALID_PRODUCER_ID_MAPPING pass through; other write errors map as
  OffsetCommit's.
- v4 is v3 that may be answered TRANSACTION_ABORTABLE (KIP-890 part 1); it is served as v3. v5 is not served:
  it implies the group is added to the transaction by this request (KIP-890 part 2), which the transaction
  coordinator does not do.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.offsets import OffsetCommit
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

# Per partition of the request: an error already known, or the index of its commit.
_Answer = list[tuple[int, ErrorCode | int]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    commits, answers = _commits(ctx, request)
    errors = await ctx.broker.groups.txn_commit_offsets(
        request.group_id, request.transactional_id, request.producer_id, request.producer_epoch,
        getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
        getattr(request, "generation_id", -1), commits,
        ctx.broker.txn_links.verify) if commits else []
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=tuple(
        _topic_response(ctx, topic.name, answer, errors) for topic, answer in zip(request.topics, answers, strict=True)
    ))


def _commits(ctx: RequestContext, request: Any) -> tuple[list[OffsetCommit], list[_Answer]]:
    """The commits of partitions that exist, and per topic where each partition's answer comes from."""
    image = ctx.broker.image
    commits: list[OffsetCommit] = []
    answers: list[_Answer] = []
    refusal = ErrorCode.none
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        refusal = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        refusal = ErrorCode.group_authorization_failed
    for topic in request.topics:
        found = image.topics_by_name.get(topic.name)
        answer: _Answer = []
        topic_refusal = refusal
        if topic_refusal == ErrorCode.none and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name):
            topic_refusal = ErrorCode.topic_authorization_failed
        for p in topic.partitions:
            if topic_refusal != ErrorCode.none:
                answer.append((p.partition_index, topic_refusal))
                continue
            if found is None or p.partition_index not in found.partitions:
                answer.append((p.partition_index, ErrorCode.unknown_topic_or_partition))
                continue
            answer.append((p.partition_index, len(commits)))
            commits.append(OffsetCommit(topic.name, p.partition_index, p.committed_offset,
                                        getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
        answers.append(answer)
    return commits, answers


def _topic_response(ctx: RequestContext, name: str, answer: _Answer, errors: list[ErrorCode]) -> Any:
    cls = ctx.nested("TxnOffsetCommitResponsePartition")
    partitions = tuple(
        make(cls, partition_index=index, error_code=a if isinstance(a, ErrorCode) else errors[a]) for index, a in answer
    )
    return make(ctx.nested("TxnOffsetCommitResponseTopic"), name=name, partitions=partitions)


API = Api(key=28, name="TxnOffsetCommit", min_version=0, max_version=4, handle=handle)
