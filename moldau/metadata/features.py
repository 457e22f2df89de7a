"""Feature levels (KIP-584): which features the code supports and which levels the cluster has finalized.

Finalized levels are facts in the metadata log (`FeatureLevelRecord`, as Kafka's); a feature without one is at
its default, the level a freshly formatted Kafka 4.2 cluster finalizes. Level 0 means the feature is off.

Pure: no I/O. `check_update` validates an UpdateFeatures change the way Kafka's controller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode, KafkaError

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"
ELR_VERSION = "eligible.leader.replicas.version"
STREAMS_VERSION = "streams.version"

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

# metadata.version levels: 7 is 3.3-IV3 (the oldest Kafka 4 accepts), 29 is 4.2-IV1. Those marked True changed
# the metadata log's format, so a safe downgrade past them would lose information (Kafka refuses it).
_METADATA_CHANGES = frozenset({7, 8, 11, 13, 14, 15, 17, 23})
METADATA_VERSION_MIN, METADATA_VERSION_LATEST = 7, 29
_RELEASES = {7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0",
             13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3",
             19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2",
             25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0", 29: "4.2-IV1"}


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_level: int  # the lowest level this code supports
    max_level: int  # the highest level this code supports
    default: int  # the finalized level when the metadata log has none
    why_limited: str = ""


# What Moldau supports. A max of 0 is a feature Kafka 4.2 knows whose higher levels Moldau does not implement.
SUPPORTED: Mapping[str, Feature] = {f.name: f for f in (
    Feature(METADATA_VERSION, METADATA_VERSION_MIN, METADATA_VERSION_LATEST, METADATA_VERSION_LATEST),
    Feature(KRAFT_VERSION, 0, 1, 0),
    Feature(GROUP_VERSION, 0, 1, 1),
    Feature(TRANSACTION_VERSION, 0, 0, 0, "transactions are KIP-890 part 1 (no per-transaction epoch bump)"),
    Feature(SHARE_VERSION, 0, 1, 1),
    Feature(ELR_VERSION, 0, 0, 0, "no eligible leader replicas (KIP-966)"),
    Feature(STREAMS_VERSION, 0, 0, 0, "no streams groups (KIP-1071)"),
)}


# The APIs a feature turns on: at level 0 they are neither advertised nor served, as in Kafka.
GATED_APIS: Mapping[str, tuple[int, ...]] = {GROUP_VERSION: (68, 69), SHARE_VERSION: (76, 77, 78, 79)}


def turned_off_apis(features: Mapping[str, int]) -> dict[int, str]:
    """API key -> the feature at level 0 that turns it off."""
    levels = finalized(features)
    return {key: name for name, keys in GATED_APIS.items() if levels[name] == 0 for key in keys}


def finalized(features: Mapping[str, int]) -> dict[str, int]:
    """Every feature's finalized level: the metadata log's, else its default."""
    return {name: features.get(name, f.default) for name, f in SUPPORTED.items()}


def bootstrap(features: Mapping[str, int]) -> list[tuple[str, int]]:
    """The levels to record for features the metadata log has none for: their defaults, where above 0."""
    return [(name, f.default) for name, f in SUPPORTED.items() if name not in features and f.default > 0]


def release(level: int) -> str:
    """metadata.version's release name, such as 4.2-IV1."""
    return _RELEASES.get(level, f"level {level}")


def check_update(features: Mapping[str, int], name: str, level: int, upgrade_type: int) -> None:
    """Raise INVALID_UPDATE_VERSION if `name` may not move to `level` with this upgrade type."""
    feature = SUPPORTED.get(name)
    if feature is None:
        raise _invalid(f"the controller does not support the feature {name}")
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _invalid(f"unknown upgrade type {upgrade_type}")
    current = finalized(features)[name]
    if level != 0 and not feature.min_level <= level <= feature.max_level:
        raise _invalid(f"{name} level {level} is outside the supported range "
                       f"{feature.min_level}-{feature.max_level}" + (f": {feature.why_limited}"
                                                                       if feature.why_limited else ""))
    if level > current and upgrade_type != UPGRADE:
        raise _invalid(f"cannot downgrade {name} from {current} to the higher level {level}")
    if level < current and upgrade_type == UPGRADE:
        raise _invalid(f"cannot upgrade {name} from {current} to the lower level {level}; ask for a downgrade")
    if name == METADATA_VERSION:
        _check_metadata_version(current, level, upgrade_type)
    if name == KRAFT_VERSION and level < current:
        raise _invalid("kraft.version cannot be downgraded: the voter set is in the metadata log")


def _check_metadata_version(current: int, level: int, upgrade_type: int) -> None:
    if level < METADATA_VERSION_MIN:
        raise _invalid(f"metadata.version cannot be below {METADATA_VERSION_MIN} ({release(METADATA_VERSION_MIN)})")
    if level >= current:
        return
    if upgrade_type == UNSAFE_DOWNGRADE:
        raise _invalid("unsafe metadata.version downgrades are not supported")
    changed = [v for v in range(level + 1, current + 1) if v in _METADATA_CHANGES]
    if changed:
        raise _invalid(f"refusing to downgrade metadata.version to {release(level)}: {release(changed[-1])} "
                       "changed the metadata format, and a downgrade past it could lose metadata")


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_update_version, message)
