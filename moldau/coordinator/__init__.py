"""Coordinators: brokers that own state keyed by an id (a consumer group), placed on the partitions of an
internal compacted topic, so whichever broker leads the partition coordinates the id.

Only the group coordinator exists (`moldau.coordinator.group`); a transaction coordinator would sit beside it.
"""
