/* `tpuloop config` with embedding tables: the "embedding" section or a
 * binary TPUEmbeddingConfiguration (--embedding_config), each table's bytes
 * (rows x dim x 4 x (1 + slots)) and the per-step workspace bound, and the
 * errors of a wrong section. */
#include <criterion/criterion.h>
#include <string.h>

#include "test_cli_util.h"

Test(cli_embedding, config_reports_tables_and_memory)
{
    tc_result r = tc_run(NULL, "config --json --embedding='{\"tables\": [{\"name\": \"user\", \"vocabulary_size\": 1000, "
                               "\"dim\": 16, \"optimizer\": {\"type\": \"adam\", \"learning_rate\": 0.01}}, {\"name\": "
                               "\"item\", \"vocabulary_size\": 300, \"dim\": 8}], \"features\": [{\"name\": \"u\", "
                               "\"table\": \"user\"}, {\"name\": \"i\", \"table\": \"item\"}], \"optimizer\": "
                               "{\"type\": \"adagrad\", \"learning_rate\": 0.1}, \"batch_size_per_tensor_core\": 64}'");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    json_t *j = tc_json(&r), *e = json_object_get(j, "embedding");
    cr_assert(json_is_object(e));
    json_t *t0 = json_array_get(json_object_get(e, "tables"), 0), *t1 = json_array_get(json_object_get(e, "tables"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(t0, "optimizer")), "ADAM");
    cr_assert_eq(json_integer_value(json_object_get(t0, "slots")), 2);
    cr_assert_eq(json_integer_value(json_object_get(t0, "bytes")), 1000 * 16 * 4 * 3);
    cr_assert_str_eq(json_string_value(json_object_get(t1, "optimizer")), "Adagrad"); /* the global one */
    cr_assert_eq(json_integer_value(json_object_get(t1, "bytes")), 300 * 8 * 4 * 2);
    cr_assert_eq(json_integer_value(json_object_get(e, "table_bytes")), 1000 * 16 * 4 * 3 + 300 * 8 * 4 * 2);
    int64_t per_id = json_integer_value(json_object_get(e, "workspace_bytes_per_id"));
    cr_assert_gt(per_id, 16 * 4);
    cr_assert_eq(json_integer_value(json_object_get(e, "workspace_bytes_at_one_id_per_bag")), per_id * 64 * 2);
    /* the section is kept in the run config */
    cr_assert(json_is_object(json_object_get(json_object_get(j, "run_config"), "embedding")));
    cr_assert_null(json_object_get(e, "table_bytes_per_host"), "one host holds everything");
    json_decref(j);
    tc_done(&r);

    /* Hosts as processes each hold their shard: host 0 of 3 the most, by DIV
     * 334 of the 1000 user rows and 100 of the 300 item rows. */
    r = tc_run(NULL, "config --json --num_hosts=3 --per_host_input_for_training=BROADCAST --embedding='{\"tables\": "
                     "[{\"name\": \"user\", \"vocabulary_size\": 1000, \"dim\": 16}, {\"name\": \"item\", "
                     "\"vocabulary_size\": 300, \"dim\": 8}], \"features\": [{\"name\": \"u\", \"table\": "
                     "\"user\"}, {\"name\": \"i\", \"table\": \"item\"}], \"optimizer\": {\"type\": "
                     "\"adagrad\", \"learning_rate\": 0.1}}'");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    j = tc_json(&r);
    e = json_object_get(j, "embedding");
    cr_assert_eq(json_integer_value(json_object_get(e, "table_bytes_per_host")), 334 * 16 * 4 * 2 + 100 * 8 * 4 * 2);
    json_decref(j);
    tc_done(&r);

    r = tc_run(NULL, "config --embedding_config=tests/data/emb_config.pb");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "embedding\n") != NULL && strstr(r.out, "tables and slots") != NULL, "%s", r.out);
    tc_done(&r);
}

Test(cli_embedding, config_errors)
{
    tc_result r = tc_run(NULL, "config --embedding='[1]'");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "embedding must be null or a JSON object") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --embedding='{\"tables\": []}' --embedding_config=x.pb");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "embedding_config and embedding are both set") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --embedding_config=/nonexistent/emb.pb");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "/nonexistent/emb.pb") != NULL, "%s", r.err);
    tc_done(&r);
    r = tc_run(NULL, "config --embedding='{\"tables\": [{\"name\": \"t\", \"vocabulary_size\": 10, \"dim\": 4}], "
                     "\"features\": [{\"table\": \"t\"}], \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 0.1}, "
                     "\"bogus\": 1}'");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "bogus") != NULL, "%s", r.err);
    tc_done(&r);
}
