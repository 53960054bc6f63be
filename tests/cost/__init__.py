"""Tests of cost: prices, the budget, prompt-cache padding."""
