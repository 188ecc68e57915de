/*
 * What the public API's functions kept outside session.c (prompt_rounds.c) need of a session:
 * session.c defines these, over its private struct.
 */
#ifndef VH_SESSION_SESSION_ACCESS_H
#define VH_SESSION_SESSION_ACCESS_H

#include <stddef.h>

#include "family/family.h"

/* VH_OK when the call named `call` may go on: the session is not NULL, not used in a child of
 * fork() (VH_ERR_FORKED) and not shut down; else that failure, reported as session.c reports its own. */
vh_status vh_session_enter(vh_session *s, const char *call);
/* Record a failed call (the thread's vh_last_error, the session's last error, the log); returns its
 * status. s may be NULL. */
vh_status vh_session_report(vh_session *s, const vh_error *err);
/* Whether a caller's struct of caller_size bytes is usable by this version, which knows known_size
 * of it (as every struct the API takes: at least that long, and zero beyond it). */
int vh_session_struct_size_ok(const void *st, size_t caller_size, size_t known_size);

const vh_family *vh_session_family(const vh_session *s);
const vh_program *vh_session_program(const vh_session *s);

#endif
