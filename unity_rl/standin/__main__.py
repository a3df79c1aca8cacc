"""``python -m unity_rl.standin SCENE [args]``: run a stand-in Unity player (see player.py)."""
from unity_rl.standin.player import main

main()
