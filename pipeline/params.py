"""The pipeline's tunable parameters: defined in the core (:mod:`queueops.pipeline_params`), since
the config validates ``[pipeline.params]`` against them and the core never imports the pipeline."""

from queueops.pipeline_params import Params

__all__ = ["Params"]
