"""Teleprompters: the disagreement-driven update loop and the head-to-head harness."""
