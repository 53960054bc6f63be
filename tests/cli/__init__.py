"""Tests of the command line and the pytest plugin: commands end to end, bad input, error messages, the first hour."""
