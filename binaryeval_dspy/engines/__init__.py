"""Engines: what executes a judging plan's LM calls (`base.Engine`; one module per engine)."""
