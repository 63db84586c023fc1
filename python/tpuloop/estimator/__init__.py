"""tpuloop.estimator: tf.compat.v1.estimator — RunConfig, ModeKeys, and
tpuloop.estimator.tpu (TPUConfig, TPUEstimator, TPUEstimatorSpec,
InputPipelineConfig)."""
from ._run_config import ModeKeys, RunConfig
from . import tpu

__all__ = ["ModeKeys", "RunConfig", "tpu"]
