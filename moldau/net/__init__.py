"""Outbound connections from one Moldau node to another."""
