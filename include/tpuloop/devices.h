/*
 * tpuloop/devices.h — the devices a run has: one CPU device per core today.
 *
 * A device is a worker thread, pinned to a core when the machine has enough
 * cores. By default a process gets one device per core of its affinity mask;
 * a virtual device count (`--devices=N`, TPULOOP_DEVICE_COUNT=N, or the
 * `devices` config field) gives N devices on any machine, like XLA's forced
 * host device count, so that every topology can be tested on two cores.
 *
 * Devices are numbered globally as JAX numbers them in a multi-process job:
 * host h owns the contiguous block of ids [h*L, (h+1)*L), where L is the
 * number of devices per host, and device i is named "cpu:i".
 *
 *     tl_devices *devs;
 *     if (tl_devices_create(8, 1, 0, &devs) != TL_OK) ...   // 8 virtual devices
 *     for (int i = 0; i < tl_devices_count(devs); i++)
 *         printf("%s\n", tl_devices_get(devs, i)->name);      // cpu:0 .. cpu:7
 *     tl_devices_destroy(devs);
 */
#ifndef TPULOOP_DEVICES_H
#define TPULOOP_DEVICES_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_DEVICE_NAME_MAX 24

typedef struct tl_device {
    int id;          /* global id: host * per_host + local_index */
    int host;        /* host (process) that owns the device */
    int local_index; /* index among its host's devices */
    int cpu;         /* the core its worker is pinned to; -1 when unpinned */
    char name[TL_DEVICE_NAME_MAX]; /* "cpu:<id>" */
} tl_device;

typedef struct tl_devices tl_devices;

/* The number of cores in this process's affinity mask (at least 1). */
TL_API int tl_available_cpus(void);

/*
 * Creates the device list of a job of num_hosts hosts with per_host devices
 * each; this process is host host_id. per_host == 0 discovers: one device per
 * core of the affinity mask. Devices of this host are pinned to the cores of
 * the mask in order when per_host <= the number of cores, and unpinned
 * otherwise; devices of other hosts are unpinned (they live elsewhere).
 * Errors: TL_EINVAL for per_host < 0, num_hosts < 1, host_id outside
 * [0, num_hosts) or a total over 1<<20 devices; TL_ENOMEM.
 */
TL_API tl_status tl_devices_create(int per_host, int num_hosts, int host_id, tl_devices **out);

/* Accepts NULL. */
TL_API void tl_devices_destroy(tl_devices *devs);

TL_API int tl_devices_count(const tl_devices *devs);     /* global count */
TL_API int tl_devices_per_host(const tl_devices *devs);
/* The k-th core (k >= 0) of the affinity mask that no device of this host
 * is pinned to, or -1 when there is none (or the devices are unpinned). */
TL_API int tl_devices_spare_cpu(const tl_devices *devs, int k);
TL_API int tl_devices_num_hosts(const tl_devices *devs);
TL_API int tl_devices_host_id(const tl_devices *devs);
/* True when the count was given rather than discovered. */
TL_API bool tl_devices_is_virtual(const tl_devices *devs);

/* Device i (0 <= i < count), or NULL when i is out of range. Valid until the
 * list is destroyed. */
TL_API const tl_device *tl_devices_get(const tl_devices *devs, int i);

/*
 * Keras' list_devices(device_type): the global device ids in order. type NULL
 * or "cpu" (any case) lists every device; "gpu" and "tpu" are an error
 * (TL_EINVAL naming the type: this build has CPU devices only), as JAX raises
 * for a backend it does not have; any other type is TL_EINVAL too.
 * *ids is a tl_malloc'd array the caller frees with tl_free_ids().
 */
TL_API tl_status tl_list_devices(const tl_devices *devs, const char *device_type, int **ids, int *count);
TL_API void tl_free_ids(int *ids);

/* Keras' get_device_count(device_type); the same rules as tl_list_devices. */
TL_API tl_status tl_get_device_count(const tl_devices *devs, const char *device_type, int *count);

/*
 * Parses a device name as JAX's backend does: "cpu:3" is device 3, a name
 * without ':' is id 0 of that type ("cpu" → 0). The id must be a decimal
 * integer in [0, count); errors are TL_EINVAL "Device not found: <name>".
 */
TL_API tl_status tl_device_parse(const tl_devices *devs, const char *name, int *id);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_DEVICES_H */
