"""Unity's ``.demo`` demonstration files: ``load_demo`` reads them, ``write_demo`` writes them.

Contract: the format is the one Unity's Demonstration Recorder writes and ML-Agents 1.1.0's
``mlagents/trainers/demo_loader.py`` reads (``format.py``); files written here load in ML-Agents
with the same steps, observations and actions, and files it writes load here identically
(``tests/test_demos.py`` against fixtures made in an mlagents-learn venv). A demonstration is one
agent's records of one behavior. ``load_demo`` pairs each observation with the *previous* action
by default, as ML-Agents does (``pairing="aligned"`` for the action taken there); see its
docstring. Torch-free: numpy, protobuf, Pillow and mlagents-envs' message classes only.
Guide: docs/imitation.md.
"""
from unity_rl.demos.format import DemoError, DemoFileError, DemoMeta, DemoSpecError
from unity_rl.demos.reader import (DemoEpisode, DemoRecords, Demonstration, load_demo,
                                   spec_mismatch)
from unity_rl.demos.writer import RecordedEpisode, write_demo

__all__ = ["DemoEpisode", "DemoError", "DemoFileError", "DemoMeta", "DemoRecords",
           "DemoSpecError", "Demonstration", "RecordedEpisode", "load_demo", "spec_mismatch",
           "write_demo"]
