#include "session/create_progress.h"

void vh_create_progress_init(vh_create_progress *p, vh_progress_fn fn, void *user)
{
    p->fn = fn;
    p->user = user;
    p->last = 0;
}

vh_status vh_create_progress_report(vh_create_progress *p, const char *stage, double fraction, vh_error *err)
{
    if (!p->fn) return VH_OK;
    if (!(fraction >= p->last)) fraction = p->last; /* NaN too */
    if (fraction > 1) fraction = 1;
    p->last = fraction;
    if (p->fn(p->user, stage, fraction) != 0)
        return vh_error_set(err, VH_ERR_CANCELLED, "vh_session_create cancelled by the progress callback at "
                            "'%s' (%.0f%%)", stage, fraction * 100);
    return VH_OK;
}
