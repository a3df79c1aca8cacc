"""unity_rl."""
