"""Engines: ways of sending a judging plan's prepared requests to a model and returning the replies."""
