/* fuzz_emb_config.c — libFuzzer target for the embedding configuration
 * readers (tpuloop/emb_spec.h): TensorFlow's binary TPUEmbeddingConfiguration
 * and the JSON `embedding` section.
 *
 * Input layout: byte 0 picks the reader (even: the proto, odd: JSON); the
 * rest is the bytes or the text. Everything must end in a status with a
 * message, never a crash, a leak or undefined behaviour. A failure leaves no
 * spec; a success must hold what the header promises — tables and features
 * in range, names set, every table's optimizer valid and written as JSON
 * that reads back as itself — and a small enough config is handed to the
 * engine, which must take it or refuse it with a status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/config.h"
#include "tpuloop/emb_spec.h"
#include "tpuloop/embedding.h"

#define CHECK(c)                 \
    do {                         \
        if (!(c))                \
            __builtin_trap();    \
    } while (0)

static void check_config(const tl_emb_config *c)
{
    CHECK(c->num_tables >= 1 && c->tables != NULL);
    CHECK(c->num_features >= 1 && c->features != NULL);
    CHECK(c->mode >= TL_EMB_MODE_INFERENCE && c->mode <= TL_EMB_MODE_BACKWARD_PASS_ONLY);
    CHECK(c->num_tensor_cores >= 1 && c->batch_size_per_tensor_core >= 1 && c->num_shards >= 1);
    CHECK(c->sharding_strategy == TL_EMB_DIV_DEFAULT || c->sharding_strategy == TL_EMB_MOD);
    CHECK(c->bounds_check_mode >= TL_EMB_BOUNDS_FATAL && c->bounds_check_mode <= TL_EMB_BOUNDS_IGNORE);
    for (int i = 0; i < c->num_tables; i++) {
        const tl_emb_table_config *t = &c->tables[i];
        CHECK(t->name != NULL && t->name[0] != '\0');
        CHECK(t->vocabulary_size >= 1 && t->dim >= 1);
        CHECK(t->combiner >= TL_EMB_COMBINER_MEAN && t->combiner <= TL_EMB_COMBINER_SQRTN);
        const tl_emb_optimizer *o = t->optimizer != NULL ? t->optimizer : &c->optimizer;
        CHECK(tl_emb_optimizer_validate(o) == TL_OK);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(c->tables[j].name, t->name) != 0);
    }
    for (int j = 0; j < c->num_features; j++) {
        const tl_emb_feature_config *f = &c->features[j];
        CHECK(f->name != NULL && f->name[0] != '\0');
        CHECK(f->table >= 0 && f->table < c->num_tables);
        CHECK(f->max_sequence_length >= 0);
    }
}

/* Small configs go on to the engine, whose config checks are fuzzed too. */
static void try_engine(const tl_emb_config *c)
{
    int64_t floats = 0;
    for (int i = 0; i < c->num_tables; i++) {
        if (c->tables[i].vocabulary_size > (1 << 16) || c->tables[i].dim > 64)
            return;
        floats += c->tables[i].vocabulary_size * c->tables[i].dim;
    }
    for (int j = 0; j < c->num_features; j++)
        if (c->features[j].max_sequence_length > 16)
            return;
    if (floats > (1 << 16) || c->num_tables > 32 || c->num_features > 32 || c->num_tensor_cores > 8 ||
        c->batch_size_per_tensor_core > 64 || c->num_shards > 8)
        return;
    tl_emb_engine *eng = NULL;
    tl_status st = tl_emb_engine_create(c, &eng);
    if (st != TL_OK) {
        CHECK(eng == NULL && tl_last_error()[0] != '\0');
        return;
    }
    CHECK(tl_emb_table_bytes(eng) >= floats * 4);
    tl_emb_engine_destroy(eng);
}

/* Each table's optimizer written as JSON (tl_emb_optimizer_to_json) reads
 * back, and writes the same text again. */
static void check_optimizer_json(const tl_emb_config *c)
{
    for (int i = 0; i < c->num_tables; i++) {
        const tl_emb_optimizer *o = c->tables[i].optimizer != NULL ? c->tables[i].optimizer : &c->optimizer;
        char *text = NULL, *again = NULL;
        CHECK(tl_emb_optimizer_to_json(o, &text) == TL_OK);
        static const char head[] = "{\"tables\": [{\"vocabulary_size\": 2, \"dim\": 1, \"optimizer\": ";
        static const char tail[] = "}], \"features\": [{\"table\": 0}]}";
        size_t n = strlen(head) + strlen(text) + strlen(tail);
        char *section = malloc(n + 1);
        CHECK(section != NULL);
        strcpy(section, head);
        strcat(section, text);
        strcat(section, tail);
        tl_emb_spec *back = NULL;
        CHECK(tl_emb_spec_from_json(section, n, &back) == TL_OK);
        CHECK(tl_emb_optimizer_to_json(tl_emb_spec_config(back)->tables[0].optimizer, &again) == TL_OK);
        CHECK(strcmp(text, again) == 0);
        tl_emb_spec_destroy(back);
        free(section);
        tl_free_string(text);
        tl_free_string(again);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool json = data[0] & 1;
    tl_emb_spec *s = (tl_emb_spec *)&s;
    tl_status st;
    if (json) {
        /* The text in its own buffer, so ASan sees a read past its end. */
        char *text = malloc(size - 1 > 0 ? size - 1 : 1);
        CHECK(text != NULL);
        memcpy(text, data + 1, size - 1);
        st = tl_emb_spec_from_json(text, size - 1, &s);
        free(text);
    } else {
        uint8_t *bytes = malloc(size - 1 > 0 ? size - 1 : 1);
        CHECK(bytes != NULL);
        memcpy(bytes, data + 1, size - 1);
        st = tl_emb_spec_from_proto(bytes, size - 1, &s);
        free(bytes);
    }
    if (st != TL_OK) {
        CHECK(s == NULL);
        CHECK(tl_last_error()[0] != '\0');
        CHECK(st == TL_EPARSE || st == TL_EINVAL || st == TL_ETYPE || st == TL_EUNKNOWN || st == TL_ENOTIMPL ||
              st == TL_ENOMEM);
        return 0;
    }
    CHECK(s != NULL);
    const tl_emb_config *c = tl_emb_spec_config(s);
    check_config(c);
    check_optimizer_json(c);
    try_engine(c);
    tl_emb_spec_destroy(s);
    return 0;
}
