/*
 * loop_internal.h - the loop's own definitions (inside dataplane/loop/
 * only). Locality: every core, each for itself.
 */
#ifndef SLUICE_DP_LOOP_INTERNAL_H
#define SLUICE_DP_LOOP_INTERNAL_H

#include "loop.h"
#include "seam.h"   /* DP_CORE_TAG, and the machine under the loop */

#endif
