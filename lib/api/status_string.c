#include "vlahybrid/vlahybrid.h"

const char *vh_status_string(vh_status status)
{
    switch (status) {
    case VH_OK: return "ok";
    case VH_ERR_INVALID_ARGUMENT: return "invalid argument";
    case VH_ERR_STRUCT_SIZE: return "unknown struct_size (initialise the struct with its *_init function)";
    case VH_ERR_OUT_OF_MEMORY: return "out of host memory";
    case VH_ERR_DEVICE_OUT_OF_MEMORY: return "out of device memory or over the memory budget";
    case VH_ERR_IO: return "file input/output error";
    case VH_ERR_BAD_MODEL: return "malformed or inconsistent model checkpoint";
    case VH_ERR_UNSUPPORTED: return "unsupported model or option";
    case VH_ERR_BACKEND_NOT_FOUND: return "backend plugin not found";
    case VH_ERR_BACKEND_ABI: return "backend plugin has an incompatible ABI";
    case VH_ERR_BACKEND_FAILED: return "backend failed";
    case VH_ERR_BUSY: return "queue full";
    case VH_ERR_TIMEOUT: return "timed out";
    case VH_ERR_DROPPED: return "frame dropped for a newer one";
    case VH_ERR_CANCELLED: return "frame cancelled";
    case VH_ERR_EXPIRED: return "frame deadline expired";
    case VH_ERR_UNNORM_KEY: return "unnorm_key missing or unknown";
    case VH_ERR_BAD_FRAME: return "unusable frame";
    case VH_ERR_INTERNAL: return "internal error";
    case VH_ERR_SHUTDOWN: return "the session was shut down";
    case VH_ERR_FORKED: return "the session belongs to the parent process (used after fork)";
    }
    return "unknown status";
}
