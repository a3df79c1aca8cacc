"""Pure learners (no processes, no I/O): PPO, DDPG and the pieces they share."""
