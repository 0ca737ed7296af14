"""Static group membership of a trainer rank: the ``group.instance.id`` a PackedConsumer joins with.

With a ``group.instance.id`` the group coordinator keeps a member's
assignment under that id (KIP-345). A trainer restarted after a crash that
joins with the same id gets its partitions back at once, without a
rebalance; without one it waits while the coordinator keeps them for its
dead predecessor, until that member's ``session.timeout.ms`` has run out.
The id must be unique within the consumer group (a second live member with
the same id fences the first: a fatal error there) and the same on every
restart of the rank.

Where the id comes from, the first that applies:

1. ``instance_id="..."`` or ``config={"group.instance.id": ...}`` (the two must agree);
2. ``instance_id=False``: no id, dynamic membership, whatever the environment says;
3. ``RS_TRAINER_INSTANCE_ID`` in the environment (set but empty: dynamic);
4. ``RANK`` in the environment (the global rank torchrun and
   torch.distributed launchers set): ``"rank-<RANK>"``. ``LOCAL_RANK`` is
   not used: it repeats on every node;
5. otherwise dynamic membership (librdkafka's default).
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

INSTANCE_ID_ENV = "RS_TRAINER_INSTANCE_ID"
RANK_ENV = "RANK"
INSTANCE_ID_KEY = "group.instance.id"
# What the broker accepts (JoinGroupRequest.validateGroupInstanceId): Kafka's topic-name characters, 1-249 of them.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def resolve_instance_id(
    instance_id: str | bool | None,
    config: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> tuple[str | None, str]:
    """The ``group.instance.id`` to join with, and where it came from (for the log).

    Args:
        instance_id: A string: that id. ``False``: none. ``None``: from
            ``config`` or the environment (see the module doc).
        config: The caller's extra librdkafka settings.
        environ: The environment (``os.environ`` when ``None``).

    Returns:
        ``(id or None, source)`` with source one of ``"instance_id"``,
        ``"config"``, ``"RS_TRAINER_INSTANCE_ID"``, ``"RANK"``, ``"none"``.

    Raises:
        ValueError: ``instance_id`` and ``config`` disagree, ``instance_id``
            is ``True`` or empty, or the id has characters or a length the
            broker refuses (it says where the id came from).
    """
    env = os.environ if environ is None else environ
    in_config = config.get(INSTANCE_ID_KEY)
    if instance_id is True or instance_id == "":
        raise ValueError("instance_id is a non-empty string, False (dynamic membership) or None (from the environment)")
    if instance_id is False:
        if in_config:
            raise ValueError(f"instance_id=False (dynamic membership) contradicts config {INSTANCE_ID_KEY}={in_config!r}")
        return None, "none"
    if isinstance(instance_id, str):
        if in_config is not None and str(in_config) != instance_id:
            raise ValueError(f"instance_id={instance_id!r} and config {INSTANCE_ID_KEY}={in_config!r} disagree")
        return _checked(instance_id, "instance_id"), "instance_id"
    if instance_id is not None:
        raise ValueError(f"instance_id must be a string, False or None, not {type(instance_id).__name__}")
    if in_config is not None:
        return _checked(str(in_config), f"config {INSTANCE_ID_KEY}"), "config"
    if INSTANCE_ID_ENV in env:
        value = env[INSTANCE_ID_ENV]
        return (_checked(value, INSTANCE_ID_ENV), INSTANCE_ID_ENV) if value else (None, "none")
    rank = env.get(RANK_ENV)
    if rank:
        return _checked(f"rank-{rank}", f"{RANK_ENV}={rank!r}"), RANK_ENV
    return None, "none"


def _checked(value: str, source: str) -> str:
    if not _LEGAL.fullmatch(value):
        raise ValueError(
            f"group.instance.id {value!r} (from {source}) must be 1-249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
        )
    return value
