"""The `bineval` command-line interface."""
