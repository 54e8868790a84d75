"""The files that run a chosen design (``dse launch``): Megatron-Bridge overrides and a launch command for a
training design; the engine's serving command (TensorRT-LLM, vLLM or SGLang; one per pool for a
disaggregated design) for a serving design; and a README. Each option name written is one of those
``options.yaml`` documents for its target, with the version and source it was read from.

One module per target: :mod:`dse.launch.megatron`, :mod:`dse.launch.trtllm`, :mod:`dse.launch.vllm`,
:mod:`dse.launch.sglang`; :mod:`dse.launch.design` picks and reads the design, :mod:`dse.launch.instance`
cuts a serving design into its instances (their speculation and expert load balancer from
:mod:`dse.launch.speculation` and :mod:`dse.launch.balancer`), :mod:`dse.launch.write` writes the files.
"""

from dse.launch.write import Launched, launch_files, write_launch

__all__ = ["Launched", "launch_files", "write_launch"]
