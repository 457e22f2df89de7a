"""Networking: outbound connections from one Moldau node to another, and free local ports for servers."""
