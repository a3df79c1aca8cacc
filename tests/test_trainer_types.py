"""The trainer-type registry and ``TrainerTypeSpec.declare``: each registered spec is named as its
registry key and as its hyperparameters' ``TRAINER_TYPE``, and its references resolve."""
from __future__ import annotations

import pytest

from unity_rl.algorithms.registry import trainer_type, trainer_type_names
from unity_rl.algorithms.spec import TrainerTypeSpec, load_attribute


@pytest.mark.parametrize("name", trainer_type_names())
def test_each_spec_is_named_once_and_its_references_resolve(name):
    spec = trainer_type(name)
    assert spec.name == name == spec.hyperparameters.TRAINER_TYPE
    assert isinstance(load_attribute(spec.algorithm), type)
    assert callable(load_attribute(spec.policy_loader))


def test_declare_resolves_relative_references_against_the_package():
    class Hyper:
        TRAINER_TYPE = "mine"

    spec = TrainerTypeSpec.declare("pkg.mine", Hyper, yaml_keys={}, algorithm=".host:Algo",
                                   default_segment_steps=lambda hp, n, t=0: 1)
    assert (spec.name, spec.algorithm, spec.policy_loader) == (
        "mine", "pkg.mine.host:Algo", "pkg.mine.export:load_policy_module")
    other = TrainerTypeSpec.declare("pkg.mine", Hyper, yaml_keys={}, algorithm="a.b:C",
                                    policy_loader="x.y:z", default_segment_steps=len)
    assert (other.algorithm, other.policy_loader) == ("a.b:C", "x.y:z")
