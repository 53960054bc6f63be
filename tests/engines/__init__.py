"""Tests of executing a judging plan: the engines (local, live, batch, Ray), the answer journal, resuming, faulty endpoints."""
