/*
 * control.h - the control core (dataplane/control/), what other roles, the
 * loop and main.c may call. Locality: control core (core 0), except
 * dp_scan_data_dir (init only). The coordinators talk to owners only by
 * messages and never read shard state, so that a coordinator can later run
 * on whichever broker leads its partition.
 */
#ifndef SLUICE_DP_CONTROL_H
#define SLUICE_DP_CONTROL_H

#include "loop.h"

int  dp_scan_data_dir(struct dp_broker *b);              /* init only: recovered topics */

/* pid.c */
void dp_pid_init_producer(struct dp_core *c, struct dp_msg *m);

/* txncoord.c */
int  dp_txnc_start(struct dp_core *c);      /* core setup: load and finish interrupted work */
void dp_txnc_msg(struct dp_core *c, struct dp_msg *m);
void dp_txnc_on_write(void *cookie, int status);
void dp_txnc_timer(struct dp_core *c);
void dp_txnc_stop(struct dp_core *c);
/* group.c */
int  dp_group_start(struct dp_core *c);     /* core setup: load committed offsets */
void dp_group_msg(struct dp_core *c, struct dp_msg *m);
void dp_group_on_write(void *cookie, int status);
void dp_group_timer(struct dp_core *c);
void dp_group_stop(struct dp_core *c);

/* control.c */
void dp_control_msg(struct dp_core *c, struct dp_msg *m);

#endif
