"""The `moldau` command line."""
