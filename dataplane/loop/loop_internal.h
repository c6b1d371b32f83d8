/*
 * loop_internal.h - the loop's own definitions (inside dataplane/loop/
 * only). Locality: every core, each for itself.
 */
#ifndef SLUICE_DP_LOOP_INTERNAL_H
#define SLUICE_DP_LOOP_INTERNAL_H

#include "loop.h"

#define DP_CORE_TAG             3u        /* user_data tag of the core's own SQEs (the wake-up read) */

#endif
