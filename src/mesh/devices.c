/* devices.c — the device list: discovery from the affinity mask, virtual
 * counts, global numbering, and Keras' list_devices / device-name parsing. */
#define _GNU_SOURCE
#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../base/base_int.h"
#include "tpuloop/devices.h"

#define TL_MAX_DEVICES (1 << 20)

struct tl_devices {
    int num_hosts;
    int per_host;
    int host_id;
    bool is_virtual;
    int count;
    tl_device *dev; /* (count) */
};

/* The cores of the affinity mask in ascending order; returns how many were
 * written (at most cap), and at least 1 (core 0 assumed when the mask cannot
 * be read). */
static int affinity_cores(int *cores, int cap)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && n < cap; c++)
            if (CPU_ISSET(c, &set))
                cores[n++] = c;
    }
    if (n == 0 && cap > 0) {
        cores[0] = 0;
        n = 1;
    }
    return n;
}

int tl_available_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

tl_status tl_devices_create(int per_host, int num_hosts, int host_id, tl_devices **out)
{
    *out = NULL;
    if (per_host < 0)
        return tl_error(TL_EINVAL, "devices must be >= 0 (0 discovers one device per core), got %d", per_host);
    if (num_hosts < 1)
        return tl_error(TL_EINVAL, "num_hosts must be >= 1, got %d", num_hosts);
    if (host_id < 0 || host_id >= num_hosts)
        return tl_error(TL_EINVAL, "host id must be in [0, %d), got %d", num_hosts, host_id);

    int cores[CPU_SETSIZE];
    int ncores = affinity_cores(cores, CPU_SETSIZE);
    bool is_virtual = per_host > 0;
    if (per_host == 0)
        per_host = ncores;
    if ((int64_t)per_host * num_hosts > TL_MAX_DEVICES)
        return tl_error(TL_EINVAL, "devices: %d hosts x %d devices is more than the %d devices allowed",
                        num_hosts, per_host, TL_MAX_DEVICES);

    tl_devices *d = tl_calloc(1, sizeof *d);
    if (d == NULL)
        return tl_error_oom();
    d->count = per_host * num_hosts;
    d->dev = tl_calloc((size_t)d->count, sizeof *d->dev);
    if (d->dev == NULL) {
        tl_free(d);
        return tl_error_oom();
    }
    d->num_hosts = num_hosts;
    d->per_host = per_host;
    d->host_id = host_id;
    d->is_virtual = is_virtual;
    bool pin = per_host <= ncores;
    for (int i = 0; i < d->count; i++) {
        tl_device *v = &d->dev[i];
        v->id = i;
        v->host = i / per_host;
        v->local_index = i % per_host;
        v->cpu = (pin && v->host == host_id) ? cores[v->local_index] : -1;
        snprintf(v->name, sizeof v->name, "cpu:%d", i);
    }
    *out = d;
    return TL_OK;
}

void tl_devices_destroy(tl_devices *devs)
{
    if (devs == NULL)
        return;
    tl_free(devs->dev);
    tl_free(devs);
}

int tl_devices_spare_cpu(const tl_devices *devs, int k)
{
    int cores[CPU_SETSIZE];
    int ncores = affinity_cores(cores, CPU_SETSIZE);
    /* Pinned devices hold the first per_host cores of the mask. */
    if (k < 0 || devs->per_host > ncores || devs->per_host + k >= ncores)
        return -1;
    return cores[devs->per_host + k];
}

int tl_devices_count(const tl_devices *devs) { return devs->count; }
int tl_devices_per_host(const tl_devices *devs) { return devs->per_host; }
int tl_devices_num_hosts(const tl_devices *devs) { return devs->num_hosts; }
int tl_devices_host_id(const tl_devices *devs) { return devs->host_id; }
bool tl_devices_is_virtual(const tl_devices *devs) { return devs->is_virtual; }

const tl_device *tl_devices_get(const tl_devices *devs, int i)
{
    if (i < 0 || i >= devs->count)
        return NULL;
    return &devs->dev[i];
}

static tl_status check_type(const char *device_type)
{
    if (device_type == NULL || strcasecmp(device_type, "cpu") == 0)
        return TL_OK;
    if (strcasecmp(device_type, "gpu") == 0 || strcasecmp(device_type, "tpu") == 0)
        return tl_error(TL_EINVAL, "device_type '%s': this build has no %s devices; only 'cpu' is available",
                        device_type, device_type);
    return tl_error(TL_EINVAL, "device_type '%s' is unknown; expected 'cpu', 'gpu' or 'tpu'", device_type);
}

tl_status tl_list_devices(const tl_devices *devs, const char *device_type, int **ids, int *count)
{
    *ids = NULL;
    *count = 0;
    tl_status st = check_type(device_type);
    if (st != TL_OK)
        return st;
    int *v = tl_alloc_array((size_t)devs->count, sizeof *v);
    if (v == NULL)
        return tl_error_oom();
    for (int i = 0; i < devs->count; i++)
        v[i] = i;
    *ids = v;
    *count = devs->count;
    return TL_OK;
}

void tl_free_ids(int *ids)
{
    tl_free(ids);
}

tl_status tl_get_device_count(const tl_devices *devs, const char *device_type, int *count)
{
    *count = 0;
    tl_status st = check_type(device_type);
    if (st != TL_OK)
        return st;
    *count = devs->count;
    return TL_OK;
}

tl_status tl_device_parse(const tl_devices *devs, const char *name, int *id)
{
    *id = -1;
    const char *colon = strchr(name, ':');
    size_t tlen = colon ? (size_t)(colon - name) : strlen(name);
    if (tlen != 3 || strncasecmp(name, "cpu", 3) != 0)
        return tl_error(TL_EINVAL, "Device not found: %s (only cpu:0 .. cpu:%d exist)", name, devs->count - 1);
    int64_t v = 0;
    if (colon != NULL && tl_parse_int64(colon + 1, &v) != 0)
        return tl_error(TL_EINVAL, "Device not found: %s (the id after ':' must be a decimal integer)", name);
    if (colon != NULL && !isdigit((unsigned char)colon[1]))
        return tl_error(TL_EINVAL, "Device not found: %s (the id after ':' must be a decimal integer)", name);
    if (v < 0 || v >= devs->count)
        return tl_error(TL_EINVAL, "Device not found: %s (only cpu:0 .. cpu:%d exist)", name, devs->count - 1);
    *id = (int)v;
    return TL_OK;
}
