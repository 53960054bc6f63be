"""Tests of loading data: item loaders, JSON files, benchmark loaders, packaged data, schema versions."""
