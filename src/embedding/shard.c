/* shard.c — rows over shards (tpu_embedding.md §8.1): DIV_DEFAULT gives
 * each shard a contiguous range, MOD deals ids round-robin; in both, shard
 * s of S holds floor(V/S) + (s < V % S) rows. */
#include "emb_int.h"

int64_t tl_emb_shard_rows(int64_t vocabulary_size, int num_shards, int shard)
{
    if (vocabulary_size < 0 || num_shards < 1 || shard < 0 || shard >= num_shards)
        return 0;
    return vocabulary_size / num_shards + (shard < vocabulary_size % num_shards ? 1 : 0);
}

void tl_emb_shard_of(tl_emb_sharding strategy, int64_t vocabulary_size, int num_shards, int64_t id, int *shard,
                     int64_t *local)
{
    int64_t q = vocabulary_size / num_shards, r = vocabulary_size % num_shards;
    if (strategy == TL_EMB_MOD) {
        *shard = (int)(id % num_shards);
        *local = id / num_shards;
    } else if (id < r * (q + 1)) {
        *shard = (int)(id / (q + 1));
        *local = id % (q + 1);
    } else {
        *shard = (int)(r + (id - r * (q + 1)) / q);
        *local = (id - r * (q + 1)) % q;
    }
}

int64_t tl_emb_shard_id(tl_emb_sharding strategy, int64_t vocabulary_size, int num_shards, int shard, int64_t local)
{
    if (strategy == TL_EMB_MOD)
        return local * num_shards + shard;
    int64_t q = vocabulary_size / num_shards, r = vocabulary_size % num_shards;
    return (int64_t)shard * q + (shard < r ? shard : r) + local;
}
