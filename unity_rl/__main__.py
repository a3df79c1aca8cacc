"""``python -m unity_rl ...`` is the ``unity-rl`` command."""
from unity_rl.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
