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

/* control_role.c: main.c gives it to core 0 (dp_core_add_role). */
extern const struct dp_role dp_control_role;

int  dp_scan_data_dir(struct dp_broker *b);              /* init only: recovered topics */

/* pid.c */
void dp_pid_init_producer(struct dp_core *c, struct dp_msg *m);

/* txncoord.c */
void dp_txnc_msg(struct dp_core *c, struct dp_msg *m);
/* group.c */
void dp_group_msg(struct dp_core *c, struct dp_msg *m);

/* control.c */
void dp_control_msg(struct dp_core *c, struct dp_msg *m);

#endif
