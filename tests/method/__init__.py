"""Tests of the method: question generation, BinEval, scoring, verdict mode, the baselines, the teleprompter and the head to head."""
