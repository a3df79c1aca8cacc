"""ONNX export of a trained policy in the layout Unity's ML-Agents inference expects.

The names, order and shapes follow ML-Agents' own exporter (Unity-Technologies/ml-agents,
``ml-agents/mlagents/trainers/torch_entities/model_serialization.py``: ``TensorNames`` and
``ModelSerializer``; outputs as in ``SimpleActor.forward`` / ``ActionModel.get_action_out``),
so that a ``.onnx`` written here drops into a Behavior Parameters component (Barracuda in
ML-Agents 2.x, Sentis in 3.x) like one written by ``mlagents-learn``:

- inputs: ``obs_0 .. obs_{n-1}``, one per observation of the BehaviorSpec, [batch, size] for
  vector observations and NCHW ([batch, C, H, W]) for visual ones; ``action_masks`` [batch,
  sum(branches)] float (1 = allowed) for discrete behaviors only; with memory
  (``network_settings.memory``) ``recurrent_in`` [batch, 1, memory_size], the agent's memory
  (zeros at an episode start). The batch axis is dynamic.
- outputs, in this order: ``version_number`` (3, ML-Agents' model API 2.0), ``memory_size`` (0:
  no recurrent memory, else the memory size); for continuous actions (continuous-only or hybrid behaviors)
  ``continuous_actions`` [batch, A],
  ``continuous_action_output_shape`` ([A]), ``deterministic_continuous_actions`` [batch, A];
  for discrete branches (discrete-only or hybrid) ``discrete_actions`` [batch, B] (int64, as ML-Agents'
  ``torch.multinomial``/``argmax`` give), ``discrete_action_output_shape`` ([[b_1, .., b_B]]),
  ``deterministic_discrete_actions`` [batch, B]; with memory ``recurrent_out`` [batch, 1,
  memory_size] last, the memory Unity feeds back as that agent's next ``recurrent_in``
  (ML-Agents' ``ModelSerializer`` recurrent contract). The shape/version outputs are constants
  (initializers), as in ML-Agents.
- the exported policy is deterministic: the ``module`` given here maps observations to the
  action to take (normalisation folded in), so ``continuous_actions`` equals
  ``deterministic_continuous_actions`` (same for discrete). Unity behaves the same whether or not
  "Deterministic Inference" is ticked. Exception: a module with a
  ``deterministic_continuous_actions(*observations)`` method supplies that output itself (SAC:
  ``continuous_actions`` = tanh(μ), ``deterministic_continuous_actions`` = μ un-squashed, as
  ML-Agents exports it).

Visual observations (3-D, channels-first as mlagents-envs 1.1.0 reports them) are declared
NCHW as Unity feeds them, in [0, 1], which is what the trainers see (``visual_scale`` rescales
them for a network trained on other units, e.g. 255 for uint8-valued images).

``module`` contract (what ``PPOLearner.export_module()`` / ``DDPGLearner.export_module()``
return): ``module(obs_0, .., obs_{n-1})`` -> float actions [batch, A] already in Unity's range
for continuous behaviors (PPO: clamp(μ, −3, 3) / 3 as ML-Agents' exporter and as the training
builds received, or clip to ±1 for weights of the earlier versions that record ``action_clip:
unit``; DDPG: its tanh bounds); ``module(obs_0, .., obs_{n-1}, action_masks)`` ->
int64 [batch, B] for discrete ones and ``(continuous, discrete)`` for hybrid ones; one tensor
per observation (images NCHW), as the ONNX inputs. The learners' modules flatten and
concatenate them into the training row themselves (``encoders.concat_inputs``) and also accept
that flat row alone. A module with ``memory_size`` > 0 takes ``recurrent_in`` as its last input
and returns ``recurrent_out`` after its actions (PPO's ``DeterministicActor``).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from unity_rl.envs.types import short_name

MODEL_EXPORT_VERSION = 3
"""ML-Agents' ``MODEL_EXPORT_VERSION`` (ModelApiVersion.MLAgents2_0)."""
DEFAULT_OPSET = 13
"""ONNX opset: accepted by Barracuda's and Sentis' importers (ML-Agents itself uses 9)."""


class TensorNames:
    """The tensor names Unity looks up (ML-Agents ``TensorNames``)."""

    observation_prefix = "obs_"
    action_mask = "action_masks"
    version_number = "version_number"
    memory_size = "memory_size"
    continuous_actions = "continuous_actions"
    continuous_action_output_shape = "continuous_action_output_shape"
    deterministic_continuous_actions = "deterministic_continuous_actions"
    discrete_actions = "discrete_actions"
    discrete_action_output_shape = "discrete_action_output_shape"
    deterministic_discrete_actions = "deterministic_discrete_actions"
    recurrent_in = "recurrent_in"
    recurrent_out = "recurrent_out"

    @staticmethod
    def observation(index: int) -> str:
        return f"{TensorNames.observation_prefix}{index}"


def onnx_obs_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """ONNX input shape (without batch) of an observation of BehaviorSpec shape ``shape``.

    mlagents-envs 1.1.0 reports visual observations channels-first (C, H, W), which is already
    the NCHW layout Unity's inference feeds (ML-Agents' own ``_get_onnx_shape`` swaps from the
    channels-last shapes older releases reported); vector shapes are unchanged.
    """
    return tuple(int(s) for s in shape)


class UnityPolicy(nn.Module):
    """Wraps ``module`` with ML-Agents' inputs and outputs (see the module docstring)."""

    def __init__(self, module: nn.Module, obs_shapes: Sequence[tuple[int, ...]],
                 continuous_size: int, discrete_branches: Sequence[int],
                 visual_scale: float = 1.0):
        super().__init__()
        self.policy = module
        self.num_obs = len(obs_shapes)
        self.visual_scale = float(visual_scale)
        self.continuous_size = int(continuous_size)
        self.discrete_branches = tuple(int(b) for b in discrete_branches)
        self.memory_size = int(getattr(module, "memory_size", 0))
        f32 = torch.float32
        self.register_buffer("version_number", torch.tensor([MODEL_EXPORT_VERSION], dtype=f32))
        self.register_buffer("memory_size_vector", torch.tensor([self.memory_size], dtype=f32))
        self.register_buffer("continuous_act_size_vector",
                             torch.tensor([self.continuous_size], dtype=f32))
        self.register_buffer("discrete_act_size_vector",
                             torch.tensor([list(self.discrete_branches)], dtype=f32))

    def forward(self, *inputs: torch.Tensor):
        observations = list(inputs[:self.num_obs])
        if self.visual_scale != 1.0:
            observations = [o * self.visual_scale if o.dim() == 4 else o for o in observations]
        extra = list(inputs[self.num_obs:])  # [action_masks][, recurrent_in]
        if self.discrete_branches:
            observations.append(extra.pop(0))  # action_masks
        out = self.policy(*observations, *extra)
        recurrent_out = None
        if self.memory_size:
            *out, recurrent_out = out
            out = out[0] if len(out) == 1 else tuple(out)
        if self.continuous_size and self.discrete_branches:
            continuous, discrete = out
        elif self.continuous_size:
            continuous, discrete = out, None
        else:
            continuous, discrete = None, out
        out = [self.version_number, self.memory_size_vector]
        if continuous is not None:
            continuous = continuous.to(torch.float32)
            deterministic = getattr(self.policy, "deterministic_continuous_actions", None)
            # two distinct graph values: the deterministic output is an Identity of the sample,
            # unless the module says otherwise (SAC: ML-Agents' un-squashed mean)
            deterministic = (torch.clone(continuous) if deterministic is None
                             else deterministic(*observations, *extra).to(torch.float32))
            out += [continuous, self.continuous_act_size_vector, deterministic]
        if discrete is not None:
            discrete = discrete.to(torch.int64)
            out += [discrete, self.discrete_act_size_vector, torch.clone(discrete)]
        if recurrent_out is not None:
            out.append(recurrent_out)
        return tuple(out)


def output_names(continuous_size: int, discrete_branches: Sequence[int],
                 memory_size: int = 0) -> list[str]:
    names = [TensorNames.version_number, TensorNames.memory_size]
    if continuous_size:
        names += [TensorNames.continuous_actions, TensorNames.continuous_action_output_shape,
                  TensorNames.deterministic_continuous_actions]
    if discrete_branches:
        names += [TensorNames.discrete_actions, TensorNames.discrete_action_output_shape,
                  TensorNames.deterministic_discrete_actions]
    if memory_size:
        names.append(TensorNames.recurrent_out)
    return names


def export_onnx(module: nn.Module, obs_shapes: Any, action_spec: Any,
                path: str | os.PathLike, *, opset: int = DEFAULT_OPSET,
                visual_scale: float = 1.0) -> Path:
    """Writes ``module`` as a Unity-ready ONNX file at ``path``; returns the path.

    ``obs_shapes``: the BehaviorSpec's observation shapes (3-D shapes are visual,
    channels-first), one ONNX input each; an int is one vector observation of that size and a
    list of ints several vector observations. ``action_spec``: anything with
    ``continuous_size`` and ``discrete_branches`` (mlagents_envs' ``ActionSpec`` fits).
    ``visual_scale`` multiplies the [0, 1] images Unity feeds before ``module`` (1: none).
    The file is written atomically (temp file, then rename).
    """
    from unity_rl.algorithms.encoders import as_obs_shapes
    from unity_rl.checkpoint import atomic_write

    continuous_size = int(getattr(action_spec, "continuous_size", 0))
    branches = tuple(int(b) for b in (getattr(action_spec, "discrete_branches", ()) or ()))
    if not continuous_size and not branches:
        raise ValueError("the action spec has neither continuous actions nor discrete branches")
    shapes = as_obs_shapes(obs_shapes)
    wrapper = UnityPolicy(module, shapes, continuous_size, branches, visual_scale).cpu().eval()

    dummy = [torch.zeros((1, *onnx_obs_shape(s))) for s in shapes]
    inputs = [TensorNames.observation(i) for i in range(len(shapes))]
    if branches:
        dummy.append(torch.ones((1, sum(branches))))
        inputs.append(TensorNames.action_mask)
    if wrapper.memory_size:
        dummy.append(torch.zeros((1, 1, wrapper.memory_size)))
        inputs.append(TensorNames.recurrent_in)
    outputs = output_names(continuous_size, branches, wrapper.memory_size)
    dynamic = {name: {0: "batch"} for name in inputs}
    for name in (TensorNames.continuous_actions, TensorNames.deterministic_continuous_actions,
                 TensorNames.discrete_actions, TensorNames.deterministic_discrete_actions,
                 TensorNames.recurrent_out):
        if name in outputs:
            dynamic[name] = {0: "batch"}

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(f) -> None:
        # The TorchScript exporter (dynamo=False) is deliberate: it needs only ``onnx`` and gives
        # the plain graph Barracuda/Sentis import; silence its deprecation notice.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            # Python ints read from the non-batch input sizes (concat_inputs) are static by
            # design; only the batch axis is dynamic.
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            # an LSTM's h0/c0 come from recurrent_in, so any batch size runs (tested)
            warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size")
            torch.onnx.export(wrapper, tuple(dummy), f, dynamo=False, opset_version=opset,
                              input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                              do_constant_folding=True, export_params=True)

    atomic_write(path, write)
    return path


# ----------------------------------------------------------------------------------------------
# Policies saved by the trainer (checkpoints and <Behavior>.pt)
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ActionLayout:
    """The two numbers an action spec boils down to (mlagents_envs' ``ActionSpec`` has both)."""

    continuous_size: int
    discrete_branches: tuple[int, ...]


@dataclass(frozen=True)
class LoadedPolicy:
    """A trained policy ready for inference or export."""

    module: nn.Module
    """Deterministic obs [, action_masks] -> action, normalisation folded in (CPU, eval)."""
    behavior_name: str
    """Full behavior name it was trained on ('3DBall' or '3DBall?team=0')."""
    obs_shapes: tuple[tuple[int, ...], ...]
    """Shapes of the behavior's observations, in BehaviorSpec order."""
    action_spec: ActionLayout
    """Continuous size and discrete branches."""
    agent_steps: int
    """Agent-steps trained when it was saved."""


def checkpoint_behaviors(path: str | os.PathLike) -> list[str]:
    """Full names of the behaviors a checkpoint or ``<Behavior>.pt`` holds policies for."""
    from unity_rl.checkpoint import load_checkpoint

    state = load_checkpoint(path)
    if "behaviors" in state:
        return sorted(state["behaviors"])
    return [str(state.get("behavior_name", "?"))]


def _behavior_entry(state: dict, path, behavior: str | None) -> dict:
    """The part of a (multi-behavior) training checkpoint that holds ``behavior``'s policy."""
    from unity_rl.checkpoint import CheckpointError

    if "behaviors" not in state:
        return state
    entries = state["behaviors"]
    if behavior is None:
        if len(entries) == 1:
            return next(iter(entries.values()))
        raise CheckpointError(f"'{path}' holds policies for several behaviors {sorted(entries)}: "
                              f"choose one with --behavior")
    for name, entry in entries.items():
        if behavior in (name, short_name(name)):
            return entry
    raise CheckpointError(f"'{path}' has no policy for behavior '{behavior}'; it has "
                          f"{sorted(entries)}")


def load_policy(path: str | os.PathLike, run_dir: str | os.PathLike | None = None,
                behavior: str | None = None) -> LoadedPolicy:
    """Rebuilds a policy from a training checkpoint (``checkpoints/step-N.pt``: ``behavior``
    picks one when it holds several) or from the final ``<Behavior>.pt`` the trainer writes;
    raises CheckpointError when it cannot.

    ``run_dir`` is accepted for symmetry with the CLI; both files are self-contained.
    """
    from unity_rl.algorithms.network_config import network_config_from_meta
    from unity_rl.algorithms.registry import trainer_type
    from unity_rl.checkpoint import CheckpointError, load_checkpoint

    del run_dir
    state = _behavior_entry(load_checkpoint(path), path, behavior)
    missing = [k for k in ("trainer_type", "behavior_name", "obs_dim", "action_spec", "network")
               if k not in state]
    if missing or not ("learner" in state or "weights" in state):
        raise CheckpointError(f"'{path}' is not a unity_rl policy or training checkpoint "
                              f"(missing {', '.join(missing) or 'learner/weights'}).")
    try:
        spec_of_type = trainer_type(state["trainer_type"])
    except KeyError as err:
        raise CheckpointError(f"'{path}' holds a {state['trainer_type']!r} policy, which this "
                              f"unity_rl cannot load: {err.args[0]}") from None
    continuous_size, branches = state["action_spec"]
    spec = ActionLayout(int(continuous_size), tuple(int(b) for b in branches))
    network = network_config_from_meta(state["network"])
    try:
        module = spec_of_type.load_policy_module(state, spec, network)
    except (KeyError, RuntimeError, ValueError) as err:
        raise CheckpointError(f"'{path}': the saved weights do not fit the saved network "
                              f"settings: {err}") from err
    shapes = state.get("obs_shapes") or [(int(state["obs_dim"]),)]
    return LoadedPolicy(module=module.eval(),
                        behavior_name=str(state["behavior_name"]),
                        obs_shapes=tuple(tuple(int(d) for d in s) for s in shapes),
                        action_spec=spec, agent_steps=int(state.get("agent_steps", 0)))


def export_checkpoint(path: str | os.PathLike, output: str | os.PathLike | None = None, *,
                      run_dir: str | os.PathLike | None = None,
                      behavior: str | None = None) -> Path:
    """ONNX export of a saved policy (``behavior``: which one, when the checkpoint holds
    several); ``output`` defaults to ``<run_dir>/<Behavior>.onnx`` (or next to ``path`` without
    a run folder). Returns the file written."""
    policy = load_policy(path, behavior=behavior)
    if output is None:
        folder = Path(run_dir) if run_dir is not None else Path(path).parent
        output = folder / f"{policy.behavior_name.split('?', 1)[0]}.onnx"
    return export_onnx(policy.module, list(policy.obs_shapes), policy.action_spec, output)
