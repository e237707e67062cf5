//go:build cgo && rdmacore

package rdmacore

// A stand-in device for measuring the backend's own cost per work request
// where no verbs device exists (cost_test.go): an ibv_context whose ops
// are functions of this file, an ibv_qp and an ibv_cq that name it.
// ibv_post_send and ibv_poll_cq are static inline in <infiniband/verbs.h>:
// they jump through ctx->ops, so the gv_* shims of cgo.go run unchanged
// and only what a provider (libibverbs' rxe, mlx5, ...) would do past
// that jump is missing: the stub records each signaled wr_id and hands it
// back as a successful completion. Used by tests only; it owns no state a
// real device touches.

/*
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define GVS_RING 4096

typedef struct {
	struct ibv_context ctx; // first: a qp's or cq's context is the stub
	struct ibv_qp qp;
	struct ibv_cq cq;
	uint64_t ids[GVS_RING];
	uint32_t lens[GVS_RING];
	unsigned head, tail;
	int refuse_at; // the index of a posted list the stub refuses (EINVAL); -1: none
} gvs_dev;

static int gvs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
	gvs_dev *s = (gvs_dev *)qp->context;
	for (int i = 0; wr; wr = wr->next, i++) {
		if (i == s->refuse_at) { *bad = wr; return EINVAL; }
		if (!(wr->send_flags & IBV_SEND_SIGNALED)) continue;
		if (s->tail - s->head == GVS_RING) { *bad = wr; return ENOMEM; }
		s->ids[s->tail % GVS_RING] = wr->wr_id;
		s->lens[s->tail % GVS_RING] = wr->num_sge ? wr->sg_list[0].length : 0;
		s->tail++;
	}
	return 0;
}

static int gvs_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) { return 0; }

static int gvs_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
	gvs_dev *s = (gvs_dev *)cq->context;
	int i = 0;
	for (; i < n && s->head != s->tail; i++, s->head++) {
		memset(&wc[i], 0, sizeof wc[i]);
		wc[i].wr_id = s->ids[s->head % GVS_RING];
		wc[i].byte_len = s->lens[s->head % GVS_RING];
		wc[i].status = IBV_WC_SUCCESS;
		wc[i].opcode = IBV_WC_RDMA_WRITE;
		wc[i].qp_num = s->qp.qp_num;
	}
	return i;
}

static gvs_dev *gvs_new(uint32_t qpn) {
	gvs_dev *s = calloc(1, sizeof *s);
	if (!s) return NULL;
	s->ctx.ops.post_send = gvs_post_send;
	s->ctx.ops.post_recv = gvs_post_recv;
	s->ctx.ops.poll_cq = gvs_poll_cq;
	s->qp.context = &s->ctx; s->qp.qp_num = qpn; s->qp.qp_type = IBV_QPT_RC;
	s->cq.context = &s->ctx;
	s->refuse_at = -1;
	return s;
}

// gvs_nop is one cgo crossing that does nothing.
static int gvs_nop(int x) { return x; }
*/
import "C"

import "unsafe"

// stubDevice is the stand-in device: its QP's and CQ's handles, which
// postSend and pollCQ accept as a device's.
type stubDevice struct {
	p      *C.gvs_dev
	QP, CQ unsafe.Pointer
}

// newStubDevice allocates a stand-in whose QP number is qpn; free it with
// close.
func newStubDevice(qpn uint32) *stubDevice {
	p := C.gvs_new(C.uint32_t(qpn))
	if p == nil {
		return nil
	}
	return &stubDevice{p: p, QP: unsafe.Pointer(&p.qp), CQ: unsafe.Pointer(&p.cq)}
}

func (s *stubDevice) close() { C.free(unsafe.Pointer(s.p)) }

// refuseAt makes the stand-in refuse the i-th WR of each posted list
// (EINVAL), as a provider refuses a WR it cannot take; -1 stops it.
func (s *stubDevice) refuseAt(i int) { s.p.refuse_at = C.int(i) }

// cgoNop is one cgo call into C that does nothing: the crossing alone.
func cgoNop(x int) int { return int(C.gvs_nop(C.int(x))) }

// wcStatusStr is libibverbs' ibv_wc_status_str, an exported function (not
// an inline through ctx->ops): the call a cgo-free loader could make, for
// comparing the two ways across.
func wcStatusStr(s int) unsafe.Pointer {
	return unsafe.Pointer(C.ibv_wc_status_str(C.enum_ibv_wc_status(s)))
}
