/* status.c — names and messages of the status list, generated from
 * TL_STATUS_MAP so that the enum, the names and the messages never drift. */
#include "base_int.h"

const char *tl_strerror(tl_status st)
{
    switch (st) {
#define TL_STATUS_MSG_(name, value, msg) \
    case TL_##name:                       \
        return msg;
        TL_STATUS_MAP(TL_STATUS_MSG_)
#undef TL_STATUS_MSG_
    }
    return "unknown status";
}

const char *tl_err_name(tl_status st)
{
    switch (st) {
#define TL_STATUS_NAME_(name, value, msg) \
    case TL_##name:                        \
        return "TL_" #name;
        TL_STATUS_MAP(TL_STATUS_NAME_)
#undef TL_STATUS_NAME_
    }
    return "TL_UNKNOWN_STATUS";
}

bool tl_status_is_input_error(tl_status st)
{
    switch (st) {
    case TL_EINVAL:
    case TL_ETYPE:
    case TL_ERUNTIME: /* TensorFlow raises RuntimeError for some config checks */
    case TL_ENOTFOUND:
    case TL_EPARSE:
    case TL_EUNKNOWN:
        return true;
    default:
        return false;
    }
}
