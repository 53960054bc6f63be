"""Tests of reaching a model: adapters and reply parsing, the response cache's scope, llama.cpp, log-probabilities, hostile replies."""
