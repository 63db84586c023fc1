"""RunConfig and ModeKeys (tf.compat.v1.estimator, and tpu.RunConfig).

A RunConfig keeps the options its caller gave, by TensorFlow's names; the C
library checks them all, in TensorFlow's order and with its messages, when
a TPUEstimator is made (config.h: tl_config_set, tl_config_resolve). Any
option of `tpuloop help config` may be given too (devices, num_hosts, ...).
"""
import json


class ModeKeys:
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)


def option_text(value):
    """An option's value as a --flag gives it to the C configuration."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


class RunConfig:
    """tf.compat.v1.estimator.tpu.RunConfig (and estimator.RunConfig)."""

    def __init__(self, tpu_config=None, evaluation_master=None, master=None, cluster=None, model_dir=None,
                 tf_random_seed=None, save_summary_steps=100, save_checkpoints_steps=None,
                 save_checkpoints_secs=None, session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100, **options):
        from .tpu import TPUConfig
        if cluster is not None:
            raise ValueError("RunConfig: cluster resolvers are not supported by tpuloop; hosts are MPI processes "
                             "(num_hosts)")
        self.tpu_config = tpu_config if tpu_config is not None else TPUConfig()
        if not isinstance(self.tpu_config, TPUConfig):
            raise TypeError("RunConfig: tpu_config must be a TPUConfig, got %r" % (type(tpu_config).__name__,))
        given = dict(evaluation_master=evaluation_master, master=master, model_dir=model_dir,
                     tf_random_seed=tf_random_seed, save_summary_steps=save_summary_steps,
                     save_checkpoints_steps=save_checkpoints_steps, save_checkpoints_secs=save_checkpoints_secs,
                     keep_checkpoint_max=keep_checkpoint_max,
                     keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
                     log_step_count_steps=log_step_count_steps)
        defaults = dict(save_summary_steps=100, keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000,
                        log_step_count_steps=100)
        # Only what the caller set goes to C, so its defaults and its rules
        # (save_checkpoints_steps vs _secs) stay TensorFlow's.
        self._options = {k: v for k, v in given.items() if v is not None and defaults.get(k, None) != v}
        self._options.update(options)
        # A ConfigProto's intra_op_parallelism_threads (0: the system picks,
        # as tpuloop's 0 does) threads each device's kernels.
        intra = getattr(session_config, "intra_op_parallelism_threads", None)
        if intra is not None and "intra_op_parallelism_threads" not in options:
            self._options["intra_op_parallelism_threads"] = intra
        self.session_config = session_config
        for k, v in given.items():
            setattr(self, k, v)
        for k, v in options.items():
            setattr(self, k, v)

    def replace(self, **kwargs):
        """A copy with some options changed (RunConfig.replace)."""
        new = RunConfig.__new__(RunConfig)
        new.__dict__.update(self.__dict__)
        new._options = dict(self._options)
        for k, v in kwargs.items():
            if k == "tpu_config":
                new.tpu_config = v
            else:
                new._options[k] = v
            setattr(new, k, v)
        return new

    def options(self):
        """[(name, value)]: the RunConfig's options, then the TPUConfig's."""
        return list(self._options.items()) + self.tpu_config.options()
