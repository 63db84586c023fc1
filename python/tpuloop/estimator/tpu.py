"""tpuloop.estimator.tpu: TPUConfig, InputPipelineConfig, TPUEstimatorSpec, TPUEstimator."""
from ._estimator import TPUEstimator, TPUEstimatorSpec
from ._run_config import RunConfig
from . import experimental


class InputPipelineConfig:
    PER_SHARD_V1 = "PER_SHARD_V1"
    PER_HOST_V1 = "PER_HOST_V1"
    PER_HOST_V2 = "PER_HOST_V2"
    BROADCAST = "BROADCAST"
    SLICED = "SLICED"


class TPUConfig:
    """tf.compat.v1.estimator.tpu.TPUConfig; the C library checks every field."""

    def __init__(self, iterations_per_loop=2, num_shards=None, num_cores_per_replica=None,
                 per_host_input_for_training=True, tpu_job_name=None, initial_infeed_sleep_secs=None,
                 input_partition_dims=None, eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
                 experimental_host_call_every_n_steps=1, experimental_allow_per_host_v2_parallel_get_next=False,
                 experimental_feed_hook=None):
        if experimental_feed_hook is not None:
            raise ValueError("TPUConfig: experimental_feed_hook is not supported by tpuloop")
        given = dict(iterations_per_loop=iterations_per_loop, num_shards=num_shards,
                     num_cores_per_replica=num_cores_per_replica,
                     per_host_input_for_training=per_host_input_for_training, tpu_job_name=tpu_job_name,
                     initial_infeed_sleep_secs=initial_infeed_sleep_secs,
                     input_partition_dims=input_partition_dims,
                     eval_training_input_configuration=eval_training_input_configuration,
                     experimental_host_call_every_n_steps=experimental_host_call_every_n_steps,
                     experimental_allow_per_host_v2_parallel_get_next=experimental_allow_per_host_v2_parallel_get_next)
        defaults = dict(iterations_per_loop=2, per_host_input_for_training=True,
                        eval_training_input_configuration="PER_HOST_V1", experimental_host_call_every_n_steps=1,
                        experimental_allow_per_host_v2_parallel_get_next=False)
        self._options = {}
        for k, v in given.items():
            setattr(self, k, v)
            if v is None or (k in defaults and type(v) is type(defaults[k]) and v == defaults[k]):
                continue
            self._options[k] = v

    def options(self):
        return [("tpu_config." + k, v) for k, v in self._options.items()]


__all__ = ["experimental", "InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec"]
