"""tpuloop.tpu.experimental: the TPUEmbedding configuration classes."""
from . import embedding

__all__ = ["embedding"]
