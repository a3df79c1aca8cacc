"""Unity builds as environments: launching, the per-agent stream, the gymnasium VectorEnv."""
