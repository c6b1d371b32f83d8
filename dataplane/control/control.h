/*
 * control.h - the control core (dataplane/control/), what main.c may call:
 * its role in core 0's loop, the services it provides, and the data
 * directory scan. Locality: init only; everything else runs on the control
 * core (core 0). Other roles reach it only by messages to its services
 * (loop.h's dp_ask_service), never by its functions; the coordinators talk
 * to owners only by messages too and never read shard state, so that a
 * coordinator can later run on whichever broker leads its partition.
 */
#ifndef SLUICE_DP_CONTROL_H
#define SLUICE_DP_CONTROL_H

#include "loop.h"

/* control_role.c: main.c gives it to core 0 (dp_core_add_role). */
extern const struct dp_role dp_control_role;
/* init only, before the cores start: where DP_SVC_CONTROL, DP_SVC_TXN and the DP_SVC_GROUP_* run. */
void dp_control_provide(struct dp_broker *b);

int  dp_scan_data_dir(struct dp_broker *b);              /* init only: recovered topics */
void dp_scan_release(struct dp_core *cc);               /* teardown: what the scan made */

#endif
