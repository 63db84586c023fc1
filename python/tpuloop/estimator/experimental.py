"""tpuloop.estimator.tpu.experimental: EmbeddingConfigSpec."""
from ..tpu.experimental import embedding as _emb


class EmbeddingConfigSpec:
    """TPUEstimator's embedding_config_spec, in the words of TensorFlow 2's
    mid-level API: feature_config (a FeatureConfig, or a dict / list of
    them) and the optimizer of tables without their own. The model_fn's
    features dict then holds each embedding feature's activations under its
    name ((batch, dim), or (batch, max_sequence_length, dim)), and the
    input's elements hold each feature's int ids under the same name."""

    def __init__(self, feature_config=None, optimizer=None, pipeline_execution_with_tensor_core=False,
                 feature_columns=None, optimization_parameters=None, **kwargs):
        if feature_columns is not None:
            raise ValueError("EmbeddingConfigSpec: feature_columns (TF 1's embedding_column) is not supported by "
                             "tpuloop; give feature_config of tpuloop.tpu.experimental.embedding.FeatureConfig")
        if kwargs:
            raise ValueError("EmbeddingConfigSpec: unsupported arguments %s" % sorted(kwargs))
        if feature_config is None:
            raise ValueError("EmbeddingConfigSpec: feature_config is required")
        self.feature_config = feature_config
        self.optimizer = optimizer if optimizer is not None else optimization_parameters
        self.pipeline_execution_with_tensor_core = pipeline_execution_with_tensor_core
        _emb.config_json(feature_config, self.optimizer, pipeline_execution_with_tensor_core)  # checks now

    def features(self):
        return _emb.flatten_features(self.feature_config)

    def learning_rate_fns(self):
        return _emb.learning_rate_fns(self.feature_config, self.optimizer)

    def _c_config(self, seed=None):
        """The C configuration; tables are seeded as `tpuloop train` seeds them (the section's seed, 0)."""
        del seed
        return _emb._Spec(_emb.config_json(self.feature_config, self.optimizer,
                                           self.pipeline_execution_with_tensor_core))
