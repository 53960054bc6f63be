"""Tests of the project itself: docs, layout rules, lazy imports, the public API, extras."""
