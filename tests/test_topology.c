/* Topology and input plans: spec tpu_estimator.md §4.1, §4.4, §10 and test
 * vectors T36–T52 (batch sizes on C=32, H=4, Cph=8, G=512 unless noted). */
#include <criterion/criterion.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

/* A resolved configuration from flags; fails the test on a config error. */
static tl_config *cfg_of(int argc, const char **argv)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    tl_status st = tl_config_apply_args(cfg, argc, (char *const *)argv, NULL, NULL);
    cr_assert_eq(st, TL_OK, "flags: %s", tl_last_error());
    st = tl_config_resolve(cfg);
    cr_assert_eq(st, TL_OK, "resolve: %s", tl_last_error());
    return cfg;
}

#define CFG(...) cfg_of((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__})

static tl_topology *topo_of(const tl_config *cfg)
{
    tl_topology *t;
    tl_status st = tl_topology_create(tl_config_get(cfg), NULL, &t);
    cr_assert_eq(st, TL_OK, "topology: %s", tl_last_error());
    return t;
}

static tl_input_plan *plan_of(const tl_topology *t, const tl_config *cfg, tl_mode mode)
{
    tl_input_plan *p;
    tl_status st = tl_input_plan_create(t, tl_config_get(cfg), mode, &p);
    cr_assert_eq(st, TL_OK, "plan: %s", tl_last_error());
    return p;
}

/* Expects plan creation to fail with st and a message containing frag. */
static void plan_fails(const tl_config *cfg, tl_mode mode, tl_status want, const char *frag)
{
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = NULL;
    tl_status st = tl_input_plan_create(t, tl_config_get(cfg), mode, &p);
    cr_assert_eq(st, want, "status %d, message: %s", st, tl_last_error());
    cr_assert_null(p);
    cr_assert(strstr(tl_last_error(), frag), "message '%s' lacks '%s'", tl_last_error(), frag);
    tl_topology_destroy(t);
}

static void topology_fails(const tl_config *cfg, tl_status want, const char *frag)
{
    tl_topology *t = NULL;
    tl_status st = tl_topology_create(tl_config_get(cfg), NULL, &t);
    cr_assert_eq(st, want, "status %d, message: %s", st, tl_last_error());
    cr_assert_null(t);
    cr_assert(strstr(tl_last_error(), frag), "message '%s' lacks '%s'", tl_last_error(), frag);
}

/* The deploy tuple (host, index, total, replicas fed) of call i. */
static void assert_call(const tl_input_plan *p, int i, int host, int index, int first, int nrep)
{
    const tl_input_call *c = &p->calls[i];
    cr_assert_eq(c->host, host, "call %d host %d", i, c->host);
    cr_assert_eq(c->index, index, "call %d index %d", i, c->index);
    cr_assert_eq(c->first_replica, first, "call %d first replica %d", i, c->first_replica);
    cr_assert_eq(c->num_replicas, nrep, "call %d replicas %d", i, c->num_replicas);
}

/* The plan's mode (NULL: not checked), its number of input_fn calls, and the
 * batch sizes input_fn and model_fn are given. */
static void assert_plan(const tl_input_plan *p, const char *mode, int calls, int64_t input_bs, int64_t model_bs)
{
    if (mode != NULL)
        cr_assert_str_eq(tl_input_plan_mode_name(p), mode);
    cr_assert_eq(p->input_fn_calls, calls, "input_fn calls %d, want %d", p->input_fn_calls, calls);
    cr_assert_eq(p->input_fn_batch_size, input_bs, "input_fn batch %lld, want %lld", (long long)p->input_fn_batch_size,
                 (long long)input_bs);
    cr_assert_eq(p->model_fn_batch_size, model_bs, "model_fn batch %lld, want %lld", (long long)p->model_fn_batch_size,
                 (long long)model_bs);
}

Test(topology, counts_32_cores_4_hosts)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4");
    tl_topology *t = topo_of(cfg);
    cr_assert_eq(tl_topology_num_hosts(t), 4);
    cr_assert_eq(tl_topology_devices_per_host(t), 8);
    cr_assert_eq(tl_topology_num_devices(t), 32);
    cr_assert_eq(tl_topology_num_replicas(t), 32);
    cr_assert_eq(tl_topology_replicas_per_host(t), 8);
    cr_assert_not(tl_topology_model_parallel(t));
    const tl_place *p = tl_topology_place(t, 13);
    cr_assert_eq(p->host, 1);
    cr_assert_eq(p->replica, 13);
    cr_assert_eq(p->partition, 0);
    cr_assert_null(tl_topology_place(t, 32));
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T36_per_host_v1)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    assert_plan(p, "PER_HOST_V1", 4, 128, 16);
    cr_assert_eq(p->replicas_per_call, 8);
    for (int h = 0; h < 4; h++)
        assert_call(p, h, h, h, 8 * h, 8);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T37_per_host_v2)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512",
                         "--per_host_input_for_training=PER_HOST_V2");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    assert_plan(p, "PER_HOST_V2", 4, 16, 16);
    cr_assert_eq(p->get_next_per_step, 8, "8 get_next per host per step");
    for (int h = 0; h < 4; h++)
        assert_call(p, h, h, h, 8 * h, 8);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T38_per_shard_v1)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512",
                         "--per_host_input_for_training=false");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    assert_plan(p, "PER_SHARD_V1", 32, 16, 16);
    for (int i = 0; i < 32; i++)
        assert_call(p, i, i / 8, i, i, 1);
    tl_input_plan_destroy(p);
    /* PER_SHARD_V1 is per core in TRAIN only: EVAL runs per host (V1). */
    tl_config_set(cfg, "eval_batch_size", "64", TL_SOURCE_FLAG);
    tl_config_set(cfg, "num_hosts", "1", TL_SOURCE_FLAG);
    cr_assert_eq(tl_config_resolve(cfg), TL_OK);
    tl_topology_destroy(t);
    t = topo_of(cfg);
    p = plan_of(t, cfg, TL_MODE_EVAL);
    assert_plan(p, "PER_HOST_V1", 1, 64, 8);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T39_broadcast)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512",
                         "--per_host_input_for_training=BROADCAST");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    assert_plan(p, "BROADCAST", 1, 512, 512);
    assert_call(p, 0, 0, 0, 0, 32);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T40_per_host_v2_model_parallel_2)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512",
                         "--per_host_input_for_training=PER_HOST_V2", "--num_cores_per_replica=2");
    tl_topology *t = topo_of(cfg);
    cr_assert_eq(tl_topology_num_replicas(t), 16);
    cr_assert_eq(tl_topology_replicas_per_host(t), 4);
    const tl_place *pl = tl_topology_place(t, 13);
    cr_assert_eq(pl->host, 1);
    cr_assert_eq(pl->replica, 6);
    cr_assert_eq(pl->partition, 1);
    cr_assert_eq(tl_topology_device_of(t, 6, 1), 13);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    assert_plan(p, NULL, 4, 32, 32);
    cr_assert_eq(p->replicas_per_call, 4);
    for (int h = 0; h < 4; h++)
        assert_call(p, h, h, h, 4 * h, 4);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T41_replica_spans_hosts)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512",
                         "--per_host_input_for_training=PER_HOST_V2", "--num_cores_per_replica=16");
    tl_topology *t = topo_of(cfg);
    cr_assert_eq(tl_topology_num_replicas(t), 2);
    cr_assert_eq(tl_topology_replicas_per_host(t), 0, "Rph is 0 when a replica spans hosts");
    cr_assert(tl_topology_replica_spans_hosts(t));
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    assert_plan(p, NULL, 2, 256, 256); /* one input_fn call per replica */
    assert_call(p, 0, 0, 0, 0, 1);
    assert_call(p, 1, 2, 1, 1, 1); /* replica 1's logical core 0 is device 16, on host 2 */
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T42_model_parallel_wider_than_host_needs_v2)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--train_batch_size=512", "--num_cores_per_replica=16");
    topology_fails(cfg, TL_EINVAL, "Except the PER_HOST_V2 mode, the num of cores required by model parallelism");
    tl_config_destroy(cfg);
}

Test(plan, T43_per_shard_with_model_parallelism)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    tl_config_set(cfg, "per_host_input_for_training", "false", TL_SOURCE_FLAG);
    tl_config_set(cfg, "num_cores_per_replica", "2", TL_SOURCE_FLAG);
    tl_config_set(cfg, "train_batch_size", "16", TL_SOURCE_FLAG);
    cr_assert_eq(tl_config_resolve(cfg), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "Model parallelism only supports per host input for training."));
    tl_config_destroy(cfg);
}

Test(plan, T44_train_batch_not_divisible)
{
    tl_config *cfg = CFG("--devices=8", "--train_batch_size=127");
    plan_fails(cfg, TL_MODE_TRAIN, TL_EINVAL, "train batch size 127 must be divisible by number of replicas 8");
    tl_config_destroy(cfg);

    cfg = CFG("--devices=8", "--train_batch_size=127", "--per_host_input_for_training=BROADCAST");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    cr_assert_eq(p->input_fn_batch_size, 127);
    cr_assert_eq(p->model_fn_batch_size, 127);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T45_eval_and_predict_batch_not_divisible)
{
    tl_config *cfg = CFG("--devices=8", "--eval_batch_size=127", "--predict_batch_size=127");
    plan_fails(cfg, TL_MODE_EVAL, TL_EINVAL, "eval batch size 127 must be divisible by number of replicas 8");
    plan_fails(cfg, TL_MODE_PREDICT, TL_EINVAL, "predict batch size 127 must be divisible by number of replicas 8");
    tl_config_destroy(cfg);

    cfg = CFG("--devices=8", "--eval_batch_size=127", "--predict_batch_size=127",
              "--per_host_input_for_training=BROADCAST");
    tl_topology *t = topo_of(cfg);
    for (int m = TL_MODE_EVAL; m <= TL_MODE_PREDICT; m++) {
        tl_input_plan *p = plan_of(t, cfg, (tl_mode)m);
        cr_assert_eq(p->input_fn_batch_size, 127);
        tl_input_plan_destroy(p);
    }
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T46_sliced_eval)
{
    tl_config *cfg = CFG("--devices=8", "--eval_batch_size=16", "--eval_training_input_configuration=SLICED");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_EVAL);
    assert_plan(p, "SLICED", 1, 16, 2);
    assert_call(p, 0, 0, 0, 0, 8);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, sliced_batch_must_divide_as_the_spec_recommends)
{
    tl_config *cfg = CFG("--devices=8", "--eval_batch_size=12", "--eval_training_input_configuration=SLICED");
    plan_fails(cfg, TL_MODE_EVAL, TL_EINVAL, "eval batch size 12 must be divisible by number of replicas 8");
    tl_config_destroy(cfg);
}

Test(plan, sliced_does_not_change_training)
{
    tl_config *cfg = CFG("--devices=8", "--train_batch_size=64", "--eval_training_input_configuration=SLICED");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    cr_assert_str_eq(tl_input_plan_mode_name(p), "PER_HOST_V1");
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T47_sliced_needs_use_tpu)
{
    tl_config *cfg = CFG("--devices=8", "--eval_batch_size=16", "--eval_training_input_configuration=SLICED",
                         "--use_tpu=false");
    plan_fails(cfg, TL_MODE_EVAL, TL_EINVAL,
               "Invalid TPUConfig `eval_training_input_configuration` value. SLICED mode only works on use_tpu = True.");
    tl_config_destroy(cfg);
    cfg = CFG("--devices=8", "--eval_batch_size=16", "--eval_training_input_configuration=SLICED",
              "--eval_on_tpu=false");
    plan_fails(cfg, TL_MODE_EVAL, TL_EINVAL, "SLICED mode only works on use_tpu = True.");
    tl_config_destroy(cfg);
}

Test(plan, T48_plain_path_gets_the_global_batch)
{
    tl_config *cfg = CFG("--devices=8", "--train_batch_size=128", "--use_tpu=false");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    cr_assert_not(p->on_device);
    assert_plan(p, "CPU", 1, 128, 128);
    tl_input_plan_destroy(p);
    /* No batch size on the plain path: no params['batch_size'] at all. */
    p = plan_of(t, cfg, TL_MODE_PREDICT);
    cr_assert_eq(p->input_fn_batch_size, -1);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, eval_on_tpu_false_evaluates_on_the_plain_path)
{
    tl_config *cfg = CFG("--devices=8", "--eval_batch_size=100", "--eval_on_tpu=false");
    tl_topology *t = topo_of(cfg);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_EVAL);
    cr_assert_not(p->on_device);
    cr_assert_eq(p->model_fn_batch_size, 100, "the whole eval_batch_size, not divided");
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T49_num_shards_must_match_replicas)
{
    tl_config *cfg = CFG("--devices=8", "--num_shards=16");
    topology_fails(cfg, TL_EINVAL, "TPUConfig.num_shards is not set correctly.");
    cr_assert(strstr(tl_last_error(), "num_replicas should be (8), got (16)"));
    tl_config_destroy(cfg);
    cfg = CFG("--devices=8", "--num_shards=4", "--num_cores_per_replica=2");
    tl_topology *t = topo_of(cfg);
    cr_assert_eq(tl_topology_num_replicas(t), 4);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, T51_train_batch_size_none_on_device)
{
    tl_config *cfg = CFG("--devices=8");
    plan_fails(cfg, TL_MODE_TRAIN, TL_EINVAL, "`train_batch_size` cannot be `None`");
    plan_fails(cfg, TL_MODE_EVAL, TL_EINVAL,
               "eval_batch_size in TPUEstimator constructor cannot be `None` if .evaluate is running on TPU.");
    plan_fails(cfg, TL_MODE_PREDICT, TL_EINVAL,
               "predict_batch_size in TPUEstimator constructor cannot be `None` if .predict is running on TPU.");
    tl_config_destroy(cfg);
}

static int warnings;
static void count_warnings(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == TL_LOG_WARN && strstr(msg, "Running TPUEstimator.evaluate for input mode PER_HOST_V2 and num_hosts 4"))
        warnings++;
}

Test(plan, T52_multi_host_eval_needs_broadcast_sliced_or_v2)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--eval_batch_size=512");
    plan_fails(cfg, TL_MODE_EVAL, TL_EINVAL,
               "TPUEstimator.evaluate is only supported under three conditions: 1. num_hosts=1; 2. BROADCAST mode; "
               "3. PER_HOST_V2 mode. mode: 2; num_hosts: 4; num_replicas=1:32");
    tl_config_destroy(cfg);

    static const char *ok[][1] = {{"--per_host_input_for_training=BROADCAST"},
                                  {"--eval_training_input_configuration=SLICED"},
                                  {"--per_host_input_for_training=PER_HOST_V2"}};
    for (size_t i = 0; i < 3; i++) {
        cfg = CFG("--devices=8", "--num_hosts=4", "--eval_batch_size=512", ok[i][0]);
        tl_topology *t = topo_of(cfg);
        tl_set_log_handler(count_warnings, NULL); /* PER_HOST_V2 warns; checked below */
        tl_input_plan *p = plan_of(t, cfg, TL_MODE_EVAL);
        tl_set_log_handler(NULL, NULL);
        tl_input_plan_destroy(p);
        tl_topology_destroy(t);
        tl_config_destroy(cfg);
    }
}

Test(plan, multi_host_predict_needs_broadcast_sliced_or_single_replica_v2)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--predict_batch_size=512",
                         "--per_host_input_for_training=PER_HOST_V2");
    plan_fails(cfg, TL_MODE_PREDICT, TL_EINVAL,
               "TPUEstimator.predict is only supported under three conditions: 1. num_hosts=1; 2. BROADCAST mode; "
               "3. PER_HOST_V2 mode with num_replicas=1. mode: 3; num_hosts: 4; num_replicas=1:32");
    tl_config_destroy(cfg);
    cfg = CFG("--devices=8", "--num_hosts=4", "--predict_batch_size=512", "--per_host_input_for_training=PER_HOST_V2",
              "--num_cores_per_replica=32");
    tl_topology *t = topo_of(cfg);
    cr_assert_eq(tl_topology_num_replicas(t), 1);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_PREDICT);
    cr_assert_eq(p->input_fn_calls, 1);
    cr_assert_eq(p->input_fn_batch_size, 512);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(plan, multi_host_v2_eval_warns)
{
    tl_config *cfg = CFG("--devices=8", "--num_hosts=4", "--eval_batch_size=512",
                         "--per_host_input_for_training=PER_HOST_V2");
    tl_topology *t = topo_of(cfg);
    warnings = 0;
    tl_set_log_handler(count_warnings, NULL);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_EVAL);
    tl_set_log_handler(NULL, NULL);
    cr_assert_eq(warnings, 1);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

static int one_core_warnings;
static void count_one_core(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == TL_LOG_WARN && strstr(msg, "Setting TPUConfig.num_shards==1 is an unsupported behavior."))
        one_core_warnings++;
}

Test(topology, num_shards_1_is_the_one_core_context)
{
    tl_config *cfg = CFG("--devices=8", "--num_shards=1", "--train_batch_size=64");
    one_core_warnings = 0;
    tl_set_log_handler(count_one_core, NULL);
    tl_topology *t = topo_of(cfg);
    tl_set_log_handler(NULL, NULL);
    cr_assert_eq(one_core_warnings, 1);
    cr_assert(tl_topology_one_core(t));
    cr_assert_eq(tl_topology_num_devices(t), 1);
    cr_assert_eq(tl_topology_num_replicas(t), 1);
    tl_input_plan *p = plan_of(t, cfg, TL_MODE_TRAIN);
    cr_assert_eq(p->input_fn_batch_size, 64);
    cr_assert_eq(p->model_fn_batch_size, 64);
    tl_input_plan_destroy(p);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

Test(topology, model_parallelism_larger_than_the_system)
{
    tl_config *cfg = CFG("--devices=4", "--num_cores_per_replica=8", "--per_host_input_for_training=PER_HOST_V2");
    topology_fails(cfg, TL_EINVAL,
                   "is larger than the total num of TPU cores in the system. num_cores_per_replica: 8, num cores in "
                   "the system: 4");
    tl_config_destroy(cfg);
}

Test(topology, model_parallelism_not_dividing_the_system)
{
    tl_config *cfg = CFG("--devices=6", "--num_cores_per_replica=4", "--per_host_input_for_training=PER_HOST_V2");
    topology_fails(cfg, TL_ERUNTIME, "The num of cores in the system (6) is not divisible by the num of cores (4)");
    tl_config_destroy(cfg);
}

Test(topology, replica_straddling_hosts_unevenly)
{
    tl_config *cfg = CFG("--devices=6", "--num_hosts=2", "--num_cores_per_replica=4",
                         "--per_host_input_for_training=PER_HOST_V2");
    topology_fails(cfg, TL_EINVAL, "a replica must lie on one host or span whole hosts");
    tl_config_destroy(cfg);
}

Test(topology, model_parallelism_needs_use_tpu)
{
    /* TensorFlow: model_parallelism_enabled = use_tpu and num_cores_per_replica. */
    tl_config *cfg = CFG("--devices=4", "--num_cores_per_replica=2", "--use_tpu=false");
    tl_topology *t = topo_of(cfg);
    cr_assert_not(tl_topology_model_parallel(t));
    cr_assert_eq(tl_topology_num_replicas(t), 4);
    tl_topology_destroy(t);
    tl_config_destroy(cfg);
}

/* ---- input_partition_dims against structures (§4.3) --------------------- */

Test(partition, tiles_in_row_major_order)
{
    /* dims [2,4] over a [2,4] grid of one element each: cores 0..7 get A..H. */
    int64_t shape[2] = {2, 4}, dims[2] = {2, 4}, off[2], size[2];
    for (int core = 0; core < 8; core++) {
        cr_assert_eq(tl_partition_tile(shape, dims, 2, core, off, size), TL_OK);
        cr_assert_eq(off[0] * 4 + off[1], core, "core %d gets element %lld", core, (long long)(off[0] * 4 + off[1]));
        cr_assert_eq(size[0], 1);
        cr_assert_eq(size[1], 1);
    }
    cr_assert_eq(tl_partition_tile(shape, dims, 2, 8, off, size), TL_EINVAL);
}

Test(partition, uneven_sizes_split_greedily)
{
    int64_t shape[1] = {5}, dims[1] = {4}, off[1], size[1];
    const int64_t want_off[4] = {0, 2, 4, 5}, want_size[4] = {2, 2, 1, 0};
    for (int core = 0; core < 4; core++) {
        cr_assert_eq(tl_partition_tile(shape, dims, 1, core, off, size), TL_OK);
        cr_assert_eq(off[0], want_off[core]);
        cr_assert_eq(size[0], want_size[core]);
    }
}

Test(partition, images_split_spatially_labels_replicated)
{
    tl_config *cfg = CFG("--devices=4", "--num_cores_per_replica=4", "--per_host_input_for_training=PER_HOST_V2",
                         "--input_partition_dims=[[1,2,2,1],null]");
    const tl_run_config *rc = tl_config_get(cfg);
    cr_assert_not_null(rc->tpu.input_partition_dims);
    tl_tensor_desc img = {NULL, 4, {8, 32, 32, 3}}, lab = {NULL, 1, {8}};
    tl_tensor_struct f = {TL_STRUCT_TENSOR, 1, &img}, l = {TL_STRUCT_TENSOR, 1, &lab};
    tl_tensor_partition fp, lp;
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 4, &f, &l, &fp, &lp), TL_OK, "%s", tl_last_error());
    cr_assert_eq(fp.kind, TL_PART_TILED);
    cr_assert_eq(lp.kind, TL_PART_REPLICATE);
    int64_t off[4], size[4];
    cr_assert_eq(tl_partition_tile(img.shape, fp.dims, 4, 3, off, size), TL_OK);
    cr_assert_eq(off[1], 16);
    cr_assert_eq(off[2], 16);
    cr_assert_eq(size[1], 16);
    cr_assert_eq(size[3], 3);
    tl_config_destroy(cfg);
}

Test(partition, dict_keys_must_match)
{
    tl_config *cfg = CFG("--devices=2", "--num_cores_per_replica=2", "--per_host_input_for_training=PER_HOST_V2",
                         "--input_partition_dims=[{\"a\":[1,2],\"b\":null}]");
    const tl_run_config *rc = tl_config_get(cfg);
    tl_tensor_desc t[2] = {{"a", 2, {4, 6}}, {"c", 2, {4, 6}}};
    tl_tensor_struct f = {TL_STRUCT_DICT, 2, t};
    tl_tensor_partition fp[2];
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 2, &f, NULL, fp, NULL), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "TPUConfig.input_partition_dims[0] mismatched feature keys. Expected ['a', 'c'], got"),
              "%s", tl_last_error());
    t[1].name = "b";
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 2, &f, NULL, fp, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(fp[0].kind, TL_PART_TILED);
    cr_assert_eq(fp[1].kind, TL_PART_REPLICATE);
    tl_config_destroy(cfg);
}

Test(partition, rank_must_match_and_product_one_goes_to_core_0)
{
    tl_config *cfg = CFG("--devices=2", "--num_cores_per_replica=2", "--per_host_input_for_training=PER_HOST_V2",
                         "--input_partition_dims=[[[1,2],[1,1,1]]]");
    const tl_run_config *rc = tl_config_get(cfg);
    tl_tensor_desc t[2] = {{NULL, 3, {4, 6, 2}}, {NULL, 3, {4, 6, 2}}};
    tl_tensor_struct f = {TL_STRUCT_LIST, 2, t};
    tl_tensor_partition fp[2];
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 2, &f, NULL, fp, NULL), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "Input partition dims must have the same number of dimensions as the `Tensor`"));
    t[0].rank = 2;
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 2, &f, NULL, fp, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(fp[1].kind, TL_PART_CORE0);
    /* A list of two tensors against a single tensor's dims. */
    tl_tensor_struct one = {TL_STRUCT_TENSOR, 1, t};
    cr_assert_eq(tl_partition_plan(rc->tpu.input_partition_dims, 2, &one, NULL, fp, NULL), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "mismatched the structure of features"));
    tl_config_destroy(cfg);
}

Test(partition, no_dims_replicates_everything)
{
    tl_tensor_desc t = {NULL, 2, {4, 4}};
    tl_tensor_struct f = {TL_STRUCT_TENSOR, 1, &t};
    tl_tensor_partition fp;
    cr_assert_eq(tl_partition_plan(NULL, 4, &f, NULL, &fp, NULL), TL_OK);
    cr_assert_eq(fp.kind, TL_PART_REPLICATE);
}
