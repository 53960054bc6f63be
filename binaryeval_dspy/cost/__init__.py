"""Cost: prices, the spending budget, prompt-cache padding and policy, usage counting."""
