/* optim_int.h — what the files of optim/ share. */
#ifndef TL_OPTIM_INT_H
#define TL_OPTIM_INT_H

#include "tpuloop/optim.h"

/* tl_lr_schedule_validate with messages prefixed by who ("Adam", or
 * "learning rate" for a schedule on its own). */
tl_status tl_lr_schedule_check(const tl_lr_schedule *s, const char *who);

#endif /* TL_OPTIM_INT_H */
