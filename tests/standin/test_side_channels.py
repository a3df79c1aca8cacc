"""Side-channel bytes written by mlagents-envs' own channels decode to the values sent."""
from __future__ import annotations

import uuid

import numpy as np
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import (
    EnvironmentParametersChannel,
)
from mlagents_envs.side_channel.raw_bytes_channel import RawBytesChannel
from mlagents_envs.side_channel.side_channel_manager import SideChannelManager

from unity_rl.standin.side_channels import SideChannelReceiver


def _stream(*channels) -> bytes:
    return bytes(SideChannelManager(list(channels)).generate_side_channel_messages())


def test_engine_configuration():
    engine = EngineConfigurationChannel()
    engine.set_configuration_parameters(width=64, height=48, quality_level=2, time_scale=20.0,
                                        target_frame_rate=-1, capture_frame_rate=60)
    lines: list[str] = []
    receiver = SideChannelReceiver(lines.append)
    receiver.process(_stream(engine))
    cfg = receiver.engine
    assert (cfg.width, cfg.height, cfg.quality_level) == (64, 48, 2)
    assert cfg.time_scale == 20.0
    assert (cfg.target_frame_rate, cfg.capture_frame_rate) == (-1, 60)
    assert any("time scale 20" in line for line in lines)


def test_float_parameters_and_samplers():
    params = EnvironmentParametersChannel()
    params.set_float_parameter("gravity", 4.5)
    params.set_uniform_sampler_parameters("scale", 0.5, 1.5, seed=3)
    params.set_gaussian_sampler_parameters("mass", 10.0, 0.1, seed=4)
    params.set_multirangeuniform_sampler_parameters("x", [(0.0, 1.0), (5.0, 6.0)], seed=5)
    receiver = SideChannelReceiver(lambda line: None)
    receiver.process(_stream(params))
    p = receiver.parameters
    assert p.get("gravity", 9.81) == 4.5
    assert p.get("missing", 1.25) == 1.25
    scale = p.sample("scale", 1.0, 2000)
    assert scale.min() >= 0.5 and scale.max() <= 1.5 and abs(scale.mean() - 1.0) < 0.05
    assert len(set(scale.tolist())) > 1000  # a fresh draw per read, like Unity's samplers
    mass = p.sample("mass", 1.0, 2000)
    assert abs(mass.mean() - 10.0) < 0.02 and abs(mass.std() - 0.1) < 0.02
    x = p.sample("x", 0.0, 2000)
    assert np.all(((x >= 0) & (x <= 1)) | ((x >= 5) & (x <= 6)))
    assert 0.3 < (x > 3).mean() < 0.7
    # A later value replaces the sampler.
    again = EnvironmentParametersChannel()
    again.set_float_parameter("scale", 2.0)
    receiver.process(_stream(again))
    assert p.get("scale", 1.0) == 2.0


def test_unknown_and_malformed_channels_are_logged_not_fatal():
    unknown = RawBytesChannel(uuid.UUID("12345678-1234-5678-1234-567812345678"))
    unknown.send_raw_data(bytearray(b"hello"))
    lines: list[str] = []
    receiver = SideChannelReceiver(lines.append)
    receiver.process(_stream(unknown))
    assert any("unknown channel 12345678" in line for line in lines)
    receiver.process(b"\x00" * 7)  # shorter than a record header
    assert any("malformed" in line for line in lines)
