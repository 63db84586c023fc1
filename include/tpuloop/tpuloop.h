/*
 * tpuloop/tpuloop.h — the whole public API.
 *
 * tpuloop is a training runtime in C with the programming model of
 * TensorFlow's TPUEstimator, TPUEmbedding and Keras' distribution API. This
 * header includes every public header:
 *
 *   base.h          status codes, error details, allocation hook, logging
 *   config.h        RunConfig / TPUConfig with TensorFlow's rules
 *   devices.h       the devices of a run (one per core, or a virtual count)
 *   topology.h      hosts, replicas, partitions and per-mode input plans
 *   mesh.h          Keras' DeviceMesh, TensorLayout and LayoutMap
 *   distribution.h  Keras' DataParallel / ModelParallel and dataset sharding
 *   rng.h           counter-based random numbers (Philox4x32-10)
 *   graph.h         writing a model_fn: traced ops on static shapes
 *   optim.h         dense optimizers and learning-rate schedules, as per-row kernels
 *   data.h          IDX files, Fashion-MNIST, a synthetic planted-model dataset
 *   text_data.h     Criteo TSV and CSV readers
 *   tfrecord.h      TFRecord files: reading and writing records, plain, GZIP or ZLIB
 *   example.h       tf.Example / SequenceExample: parsing, feature specs, a writer
 *   dataset.h       tf.data-style pipelines: TFRecord, Criteo, CSV and IDX sources, shard,
 *                   shuffle, repeat, batch, parse, prefetch, position save/restore
 *   comm.h          collectives with a fixed reduction order
 *   estimator.h     train, evaluate and predict in device loops on the replicas of this
 *                   process, from memory or from input_fn datasets by TPUEstimator's deployment
 *   models.h        built-in model_fns (the MLP, CNN, Transformer, DLRM, DCN-v2)
 *   job.h           from a resolved configuration to a running job: what `tpuloop train`,
 *                   `train_and_evaluate`, `evaluate` and `predict` do
 */
#ifndef TPULOOP_TPULOOP_H
#define TPULOOP_TPULOOP_H

#include "tpuloop/base.h"
#include "tpuloop/config.h"
#include "tpuloop/devices.h"
#include "tpuloop/topology.h"
#include "tpuloop/mesh.h"
#include "tpuloop/distribution.h"
#include "tpuloop/rng.h"
#include "tpuloop/graph.h"
#include "tpuloop/optim.h"
#include "tpuloop/emb_optim.h"
#include "tpuloop/embedding.h"
#include "tpuloop/emb_spec.h"
#include "tpuloop/data.h"
#include "tpuloop/text_data.h"
#include "tpuloop/comm.h"
#include "tpuloop/estimator.h"
#include "tpuloop/models.h"
#include "tpuloop/summary.h"
#include "tpuloop/checkpoint.h"
#include "tpuloop/tfrecord.h"
#include "tpuloop/example.h"
#include "tpuloop/dataset.h"
#include "tpuloop/criteo_synth.h"
#include "tpuloop/job.h"

#endif /* TPULOOP_TPULOOP_H */
