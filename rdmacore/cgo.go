//go:build cgo && rdmacore

package rdmacore

// This is the only file of the package that calls rdma-core (cgo_stub.go
// imports "C" too, for the stand-in device of the cost benchmarks): thin
// gv_* shims over libibverbs and librdmacm, no state and no policy. Batches (work
// requests, completions, events) cross in C memory the Go side allocates
// once per object (C.calloc) and fills through unsafe.Slice, so C never
// holds a Go pointer and the hot path allocates nothing.

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <endian.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define GV_MAX_SGE 32
#define GV_BATCH 32
#define GV_PDATA 256

typedef struct {
	uint64_t wr_id;
	uint32_t opcode, flags, nsge, imm, inv_rkey, rkey;
	uint64_t raddr, cmp, swap;
	struct ibv_sge sge[GV_MAX_SGE];
} gv_swr;

typedef struct {
	uint64_t wr_id;
	uint32_t nsge, pad;
	struct ibv_sge sge[GV_MAX_SGE];
} gv_rwr;

// gv_wc is ibv_wc reduced to what verbs.WorkCompletion carries.
typedef struct {
	uint64_t wr_id;
	uint32_t status, opcode, wc_flags, qp_num, byte_len, imm, inv_rkey, vendor_err;
} gv_wc;

typedef struct {
	uint32_t event, status;
	uint64_t id, listen_id;
	uint32_t qp_num, pdata_len;
	uint8_t responder_resources, initiator_depth, retry_count, rnr_retry_count;
	uint8_t pdata[GV_PDATA];
} gv_cme;

typedef struct {
	uint64_t max_mr_size, page_size_cap, max_msg;
	uint32_t max_qp, max_qp_wr, max_sge, max_cq, max_cqe, max_mr, max_pd, max_mw;
	uint32_t max_qp_rd_atom, max_qp_init_rd_atom, atomic_cap, transport, dev_cap_flags, max_sge_rd;
	uint32_t port_state, active_mtu, max_mtu, link_layer, active_speed, active_width, gid_tbl_len;
	uint64_t node_guid;
} gv_attr;

static int gv_errno(int rc) { return rc < 0 ? -errno : -rc; }

static int gv_nonblock(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
	return 0;
}

static int gv_query(struct ibv_context *ctx, gv_attr *a) {
	struct ibv_device_attr_ex ex;
	struct ibv_port_attr port;
	memset(&ex, 0, sizeof ex);
	memset(a, 0, sizeof *a);
	int rc = ibv_query_device_ex(ctx, NULL, &ex);
	if (rc) {
		rc = ibv_query_device(ctx, &ex.orig_attr);
		if (rc) return -rc;
	}
	struct ibv_device_attr *d = &ex.orig_attr;
	a->max_mr_size = d->max_mr_size; a->page_size_cap = d->page_size_cap;
	a->max_qp = d->max_qp; a->max_qp_wr = d->max_qp_wr; a->max_sge = d->max_sge;
	a->max_cq = d->max_cq; a->max_cqe = d->max_cqe; a->max_mr = d->max_mr; a->max_pd = d->max_pd;
	a->max_mw = d->max_mw; a->max_qp_rd_atom = d->max_qp_rd_atom; a->max_sge_rd = d->max_sge_rd;
	a->max_qp_init_rd_atom = d->max_qp_init_rd_atom; a->atomic_cap = d->atomic_cap;
	a->dev_cap_flags = d->device_cap_flags; a->node_guid = d->node_guid;
	a->transport = ctx->device->transport_type;
	if ((rc = ibv_query_port(ctx, 1, &port))) return -rc;
	a->port_state = port.state; a->active_mtu = port.active_mtu; a->max_mtu = port.max_mtu;
	a->link_layer = port.link_layer; a->active_speed = port.active_speed;
	a->active_width = port.active_width; a->gid_tbl_len = port.gid_tbl_len;
	a->max_msg = port.max_msg_sz;
	return 0;
}

// gv_gid finds the RoCE v2 IPv4 GID of port 1 (rdma_cm's choice for an
// IPv4 address) and its ifindex; -ENOENT when there is none.
static int gv_gid(struct ibv_context *ctx, int n, uint8_t *gid, uint32_t *ifindex) {
	for (int i = 0; i < n; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0)) continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && e.gid.raw[10] == 0xff && e.gid.raw[11] == 0xff) {
			memcpy(gid, e.gid.raw, 16); *ifindex = e.ndev_ifindex; return i;
		}
	}
	return -ENOENT;
}

// gv_post_send and gv_post_recv return 0, or the provider's errno with
// the index of the first WR it refused above bit 16: a bad-WR out
// parameter would be a Go pointer that cgo moves to the heap, one
// allocation per post. ibv_post_send and ibv_post_recv return an errno,
// but some providers return it negated (rdma-core 44's siw: an errno of
// 65514 was -EINVAL in the low 16 bits).
static int gv_post_result(int rc, int bad) {
	if (rc < 0)
		rc = -rc;
	return rc ? (rc & 0xffff) | bad << 16 : 0;
}

static int gv_post_send(struct ibv_qp *qp, gv_swr *w, int n) {
	struct ibv_send_wr wr[GV_BATCH], *b = NULL;
	memset(wr, 0, sizeof(wr[0]) * n);
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = w[i].wr_id;
		wr[i].sg_list = w[i].sge;
		wr[i].num_sge = w[i].nsge;
		wr[i].opcode = w[i].opcode;
		wr[i].send_flags = w[i].flags;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		switch (w[i].opcode) {
		case IBV_WR_RDMA_WRITE: case IBV_WR_RDMA_WRITE_WITH_IMM: case IBV_WR_RDMA_READ:
			wr[i].wr.rdma.remote_addr = w[i].raddr; wr[i].wr.rdma.rkey = w[i].rkey; break;
		case IBV_WR_ATOMIC_CMP_AND_SWP: case IBV_WR_ATOMIC_FETCH_AND_ADD:
			wr[i].wr.atomic.remote_addr = w[i].raddr; wr[i].wr.atomic.rkey = w[i].rkey;
			wr[i].wr.atomic.compare_add = w[i].cmp; wr[i].wr.atomic.swap = w[i].swap; break;
		case IBV_WR_SEND_WITH_INV:
			wr[i].invalidate_rkey = w[i].inv_rkey; break;
		default: break;
		}
		if (w[i].opcode == IBV_WR_SEND_WITH_IMM || w[i].opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
			wr[i].imm_data = htobe32(w[i].imm);
	}
	int rc = ibv_post_send(qp, wr, &b);
	return gv_post_result(rc, b ? (int)(b - wr) : 0);
}

static int gv_post_recv(struct ibv_qp *qp, gv_rwr *w, int n) {
	struct ibv_recv_wr wr[GV_BATCH], *b = NULL;
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = w[i].wr_id;
		wr[i].sg_list = w[i].sge;
		wr[i].num_sge = w[i].nsge;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	int rc = ibv_post_recv(qp, wr, &b);
	return gv_post_result(rc, b ? (int)(b - wr) : 0);
}

static int gv_poll(struct ibv_cq *cq, gv_wc *out, int n) {
	struct ibv_wc wc[GV_BATCH];
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		out[i].wr_id = wc[i].wr_id; out[i].status = wc[i].status; out[i].opcode = wc[i].opcode;
		out[i].wc_flags = wc[i].wc_flags; out[i].qp_num = wc[i].qp_num;
		out[i].byte_len = wc[i].byte_len; out[i].vendor_err = wc[i].vendor_err;
		out[i].imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(wc[i].imm_data) : 0;
		out[i].inv_rkey = (wc[i].wc_flags & IBV_WC_WITH_INV) ? wc[i].invalidated_rkey : 0;
	}
	return got;
}

// gv_cq_event takes one event of a completion channel and acknowledges it.
static int gv_cq_event(struct ibv_comp_channel *ch) {
	struct ibv_cq *cq; void *ctx;
	if (ibv_get_cq_event(ch, &cq, &ctx)) return -errno;
	ibv_ack_cq_events(cq, 1);
	return 0;
}

// gv_async takes one asynchronous event and acknowledges it.
static int gv_async(struct ibv_context *ctx, uint32_t *type, uint32_t *qpn) {
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev)) return -errno;
	*type = ev.event_type; *qpn = 0;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		*qpn = ev.element.qp->qp_num; break;
	default: break;
	}
	ibv_ack_async_event(&ev);
	return 0;
}

static int gv_cm_event(struct rdma_event_channel *ch, gv_cme *o) {
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev)) return -errno;
	memset(o, 0, sizeof *o);
	o->event = ev->event; o->status = ev->status;
	o->id = (uint64_t)(uintptr_t)ev->id; o->listen_id = (uint64_t)(uintptr_t)ev->listen_id;
	struct rdma_conn_param *c = &ev->param.conn;
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST: case RDMA_CM_EVENT_CONNECT_RESPONSE:
	case RDMA_CM_EVENT_ESTABLISHED: case RDMA_CM_EVENT_REJECTED:
		o->qp_num = c->qp_num;
		o->responder_resources = c->responder_resources; o->initiator_depth = c->initiator_depth;
		o->retry_count = c->retry_count; o->rnr_retry_count = c->rnr_retry_count;
		o->pdata_len = c->private_data_len > GV_PDATA ? GV_PDATA : c->private_data_len;
		if (c->private_data && o->pdata_len) memcpy(o->pdata, c->private_data, o->pdata_len);
		break;
	default: break;
	}
	rdma_ack_cm_event(ev);
	return 0;
}

static int gv_create_id(struct rdma_event_channel *ch, uint64_t *id) {
	struct rdma_cm_id *p;
	if (rdma_create_id(ch, &p, NULL, RDMA_PS_TCP)) return -errno;
	*id = (uint64_t)(uintptr_t)p;
	return 0;
}

#define ID(x) ((struct rdma_cm_id *)(uintptr_t)(x))

static void gv_sin(struct sockaddr_in *s, uint32_t ip, uint16_t port) {
	memset(s, 0, sizeof *s); s->sin_family = AF_INET;
	s->sin_addr.s_addr = htonl(ip); s->sin_port = htons(port);
}

static int gv_bind_listen(uint64_t id, uint32_t ip, uint16_t port, int backlog) {
	struct sockaddr_in s; gv_sin(&s, ip, port);
	if (rdma_bind_addr(ID(id), (struct sockaddr *)&s)) return -errno;
	if (rdma_listen(ID(id), backlog)) return -errno;
	return 0;
}

static int gv_resolve_addr(uint64_t id, uint32_t src, uint32_t ip, uint16_t port, int ms) {
	struct sockaddr_in s, d; gv_sin(&s, src, 0); gv_sin(&d, ip, port);
	return rdma_resolve_addr(ID(id), src ? (struct sockaddr *)&s : NULL, (struct sockaddr *)&d, ms) ? -errno : 0;
}

static int gv_resolve_route(uint64_t id, int ms) { return rdma_resolve_route(ID(id), ms) ? -errno : 0; }

static int gv_addrs(uint64_t id, uint32_t *lip, uint16_t *lport, uint32_t *rip, uint16_t *rport) {
	struct sockaddr_in *l = (struct sockaddr_in *)rdma_get_local_addr(ID(id));
	struct sockaddr_in *r = (struct sockaddr_in *)rdma_get_peer_addr(ID(id));
	*lip = l->sin_family == AF_INET ? ntohl(l->sin_addr.s_addr) : 0; *lport = ntohs(rdma_get_src_port(ID(id)));
	*rip = r->sin_family == AF_INET ? ntohl(r->sin_addr.s_addr) : 0; *rport = ntohs(rdma_get_dst_port(ID(id)));
	return 0;
}

// gv_id_dev names the device the CM bound id to ("" when none yet).
static const char *gv_id_dev(uint64_t id) {
	return ID(id)->verbs ? ibv_get_device_name(ID(id)->verbs->device) : "";
}

static void gv_param(struct rdma_conn_param *p, const void *pd, int n, uint8_t rr, uint8_t id, uint8_t retry, uint8_t rnr, uint32_t qpn) {
	memset(p, 0, sizeof *p);
	p->private_data = pd; p->private_data_len = n;
	p->responder_resources = rr; p->initiator_depth = id;
	p->retry_count = retry; p->rnr_retry_count = rnr; p->qp_num = qpn;
}

static int gv_connect(uint64_t id, const void *pd, int n, uint8_t rr, uint8_t ini, uint8_t retry, uint8_t rnr, uint32_t qpn) {
	struct rdma_conn_param p; gv_param(&p, pd, n, rr, ini, retry, rnr, qpn);
	return rdma_connect(ID(id), &p) ? -errno : 0;
}

static int gv_accept(uint64_t id, const void *pd, int n, uint8_t rr, uint8_t ini, uint8_t retry, uint8_t rnr, uint32_t qpn) {
	struct rdma_conn_param p; gv_param(&p, pd, n, rr, ini, retry, rnr, qpn);
	return rdma_accept(ID(id), &p) ? -errno : 0;
}

static int gv_reject(uint64_t id, const void *pd, int n) { return rdma_reject(ID(id), pd, n) ? -errno : 0; }
static int gv_establish(uint64_t id) { return rdma_establish(ID(id)) ? -errno : 0; }
static int gv_disconnect(uint64_t id) { return rdma_disconnect(ID(id)) ? -errno : 0; }
static int gv_destroy_id(uint64_t id) { return rdma_destroy_id(ID(id)) ? -errno : 0; }

// gv_cm_modify moves qp to state with the attributes the CM holds for id
// (rdma_init_qp_attr), the CM's IRD/ORD replaced by ours where given.
static int gv_cm_modify(uint64_t id, struct ibv_qp *qp, int state, int ird, int ord, int access) {
	struct ibv_qp_attr a; int mask;
	memset(&a, 0, sizeof a);
	a.qp_state = state;
	if (rdma_init_qp_attr(ID(id), &a, &mask)) return -errno;
	if (state == IBV_QPS_INIT && access >= 0) a.qp_access_flags = access;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && ird >= 0) a.max_dest_rd_atomic = ird;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && ord >= 0) a.max_rd_atomic = ord;
	return -ibv_modify_qp(qp, &a, mask);
}

static struct ibv_qp *gv_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_qp_cap *cap, int sigall) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = scq; a.recv_cq = rcq; a.cap = *cap; a.qp_type = IBV_QPT_RC; a.sq_sig_all = sigall;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp) *cap = a.cap;
	return qp;
}

static int gv_modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) { return -ibv_modify_qp(qp, a, mask); }

static int gv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, struct ibv_qp_init_attr *ia) {
	return -ibv_query_qp(qp, a, IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT |
		IBV_QP_PKEY_INDEX | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
		IBV_QP_MIN_RNR_TIMER | IBV_QP_DEST_QPN | IBV_QP_CAP | IBV_QP_AV, ia);
}

static struct ibv_mr *gv_reg_mr(struct ibv_pd *pd, uint64_t addr, uint64_t len, int access) {
	return ibv_reg_mr(pd, (void *)(uintptr_t)addr, len, access);
}

static struct ibv_mr *gv_reg_dmabuf(struct ibv_pd *pd, uint64_t off, uint64_t len, uint64_t iova, int fd, int access) {
	return ibv_reg_dmabuf_mr(pd, off, len, iova, fd, access);
}

static int gv_req_notify(struct ibv_cq *cq, int solicited) { return -ibv_req_notify_cq(cq, solicited); }
*/
import "C"

import (
	"syscall"
	"unsafe"
)

const (
	maxSGE = C.GV_MAX_SGE
	batch  = C.GV_BATCH
)

type (
	cSendWR = C.gv_swr
	cRecvWR = C.gv_rwr
	cWC     = C.gv_wc
	cCMEv   = C.gv_cme
)

// errnoOf turns a shim's negative errno (or an errno set by a call that
// returned NULL) into a syscall.Errno.
func errnoOf(rc C.int) syscall.Errno { return syscall.Errno(-rc) }

// gvErr is the error of a gv_ helper's result: 0, or a negative errno.
func gvErr(rc C.int) error {
	if rc != 0 {
		return errnoOf(rc)
	}
	return nil
}

// ibvErr is the error of a libibverbs destroy or free call's result: 0,
// or an errno.
func ibvErr(rc C.int) error {
	if rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}

func cAlloc[T any](n int) *T {
	var z T
	return (*T)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(z))))
}

func cFree[T any](p *T) { C.free(unsafe.Pointer(p)) }

// Go wrappers. Handles are unsafe.Pointer values of C objects, which Go
// never dereferences.

type devAttr = C.gv_attr

// deviceNames lists the verbs devices with their sysfs paths.
func deviceNames() (names, paths []string, err error) {
	var n C.int
	list := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, nil, errnoGet()
	}
	defer C.ibv_free_device_list(list)
	for _, d := range unsafe.Slice(list, int(n)) {
		names = append(names, C.GoString(C.ibv_get_device_name(d)))
		paths = append(paths, C.GoString(&d.ibdev_path[0]))
	}
	return names, paths, nil
}

func errnoGet() syscall.Errno {
	e := syscall.Errno(*C.__errno_location())
	if e == 0 {
		e = syscall.EIO
	}
	return e
}

func openDevice(name string) (unsafe.Pointer, error) {
	var n C.int
	list := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, errnoGet()
	}
	defer C.ibv_free_device_list(list)
	for _, d := range unsafe.Slice(list, int(n)) {
		if C.GoString(C.ibv_get_device_name(d)) == name {
			ctx := C.ibv_open_device(d)
			if ctx == nil {
				return nil, errnoGet()
			}
			return unsafe.Pointer(ctx), nil
		}
	}
	return nil, syscall.ENODEV
}

func ctxOf(p unsafe.Pointer) *C.struct_ibv_context { return (*C.struct_ibv_context)(p) }

func closeDevice(ctx unsafe.Pointer) { C.ibv_close_device(ctxOf(ctx)) }

func queryDevice(ctx unsafe.Pointer) (devAttr, error) {
	var a devAttr
	if rc := C.gv_query(ctxOf(ctx), &a); rc != 0 {
		return a, errnoOf(rc)
	}
	return a, nil
}

func roceGID(ctx unsafe.Pointer, n int) (idx int, gid [16]byte, ifindex int) {
	var ifi C.uint32_t
	rc := C.gv_gid(ctxOf(ctx), C.int(n), (*C.uint8_t)(unsafe.Pointer(&gid[0])), &ifi)
	return int(rc), gid, int(ifi)
}

func asyncFd(ctx unsafe.Pointer) int { return int(ctxOf(ctx).async_fd) }

func setNonblock(fd int) error {
	return gvErr(C.gv_nonblock(C.int(fd)))
}

func getAsync(ctx unsafe.Pointer) (typ, qpn uint32, err error) {
	var t, q C.uint32_t
	if rc := C.gv_async(ctxOf(ctx), &t, &q); rc != 0 {
		return 0, 0, errnoOf(rc)
	}
	return uint32(t), uint32(q), nil
}

func allocPD(ctx unsafe.Pointer) (unsafe.Pointer, error) {
	pd := C.ibv_alloc_pd(ctxOf(ctx))
	if pd == nil {
		return nil, errnoGet()
	}
	return unsafe.Pointer(pd), nil
}

func deallocPD(pd unsafe.Pointer) error {
	return ibvErr(C.ibv_dealloc_pd((*C.struct_ibv_pd)(pd)))
}

func regMR(pd unsafe.Pointer, addr uintptr, n int, access int) (mr unsafe.Pointer, lkey, rkey uint32, err error) {
	m := C.gv_reg_mr((*C.struct_ibv_pd)(pd), C.uint64_t(addr), C.uint64_t(n), C.int(access))
	if m == nil {
		return nil, 0, 0, errnoGet()
	}
	return unsafe.Pointer(m), uint32(m.lkey), uint32(m.rkey), nil
}

func regDmabuf(pd unsafe.Pointer, off, n, iova uint64, fd, access int) (mr unsafe.Pointer, lkey, rkey uint32, err error) {
	m := C.gv_reg_dmabuf((*C.struct_ibv_pd)(pd), C.uint64_t(off), C.uint64_t(n), C.uint64_t(iova), C.int(fd), C.int(access))
	if m == nil {
		return nil, 0, 0, errnoGet()
	}
	return unsafe.Pointer(m), uint32(m.lkey), uint32(m.rkey), nil
}

func deregMR(mr unsafe.Pointer) error {
	return ibvErr(C.ibv_dereg_mr((*C.struct_ibv_mr)(mr)))
}

func createCompChannel(ctx unsafe.Pointer) (ch unsafe.Pointer, fd int, err error) {
	c := C.ibv_create_comp_channel(ctxOf(ctx))
	if c == nil {
		return nil, -1, errnoGet()
	}
	return unsafe.Pointer(c), int(c.fd), nil
}

func destroyCompChannel(ch unsafe.Pointer) {
	C.ibv_destroy_comp_channel((*C.struct_ibv_comp_channel)(ch))
}

func createCQ(ctx unsafe.Pointer, n int, ch unsafe.Pointer) (cq unsafe.Pointer, cqe int, err error) {
	c := C.ibv_create_cq(ctxOf(ctx), C.int(n), nil, (*C.struct_ibv_comp_channel)(ch), 0)
	if c == nil {
		return nil, 0, errnoGet()
	}
	return unsafe.Pointer(c), int(c.cqe), nil
}

func destroyCQ(cq unsafe.Pointer) error {
	return ibvErr(C.ibv_destroy_cq((*C.struct_ibv_cq)(cq)))
}

func reqNotify(cq unsafe.Pointer, solicited bool) error {
	s := C.int(0)
	if solicited {
		s = 1
	}
	return gvErr(C.gv_req_notify((*C.struct_ibv_cq)(cq), s))
}

func getCQEvent(ch unsafe.Pointer) error {
	return gvErr(C.gv_cq_event((*C.struct_ibv_comp_channel)(ch)))
}

func pollCQ(cq unsafe.Pointer, out *cWC, n int) int {
	return int(C.gv_poll((*C.struct_ibv_cq)(cq), out, C.int(n)))
}

// qpCap mirrors ibv_qp_cap.
type qpCap = C.struct_ibv_qp_cap

func createQP(pd, scq, rcq unsafe.Pointer, c *qpCap, sigAll bool) (unsafe.Pointer, uint32, error) {
	s := C.int(0)
	if sigAll {
		s = 1
	}
	q := C.gv_create_qp((*C.struct_ibv_pd)(pd), (*C.struct_ibv_cq)(scq), (*C.struct_ibv_cq)(rcq), c, s)
	if q == nil {
		return nil, 0, errnoGet()
	}
	return unsafe.Pointer(q), uint32(q.qp_num), nil
}

func destroyQP(qp unsafe.Pointer) error {
	return ibvErr(C.ibv_destroy_qp((*C.struct_ibv_qp)(qp)))
}

type qpAttr = C.struct_ibv_qp_attr

func modifyQP(qp unsafe.Pointer, a *qpAttr, mask int) error {
	return gvErr(C.gv_modify((*C.struct_ibv_qp)(qp), a, C.int(mask)))
}

func queryQP(qp unsafe.Pointer) (qpAttr, qpCap, error) {
	var a qpAttr
	var ia C.struct_ibv_qp_init_attr
	if rc := C.gv_query_qp((*C.struct_ibv_qp)(qp), &a, &ia); rc != 0 {
		return a, ia.cap, errnoOf(rc)
	}
	return a, ia.cap, nil
}

func postSend(qp unsafe.Pointer, w *cSendWR, n int) (bad int, err error) {
	return postResult(C.gv_post_send((*C.struct_ibv_qp)(qp), w, C.int(n)))
}

func postRecv(qp unsafe.Pointer, w *cRecvWR, n int) (bad int, err error) {
	return postResult(C.gv_post_recv((*C.struct_ibv_qp)(qp), w, C.int(n)))
}

// postResult splits a gv_post_* result into the refused WR's index and
// the errno.
func postResult(rc C.int) (bad int, err error) {
	if rc == 0 {
		return 0, nil
	}
	return int(rc >> 16), syscall.Errno(rc & 0xffff)
}

// The connection manager. An id is a uint64 (the rdma_cm_id's address).

func createEventChannel() (unsafe.Pointer, int, error) {
	ch := C.rdma_create_event_channel()
	if ch == nil {
		return nil, -1, errnoGet()
	}
	return unsafe.Pointer(ch), int(ch.fd), nil
}

func destroyEventChannel(ch unsafe.Pointer) {
	C.rdma_destroy_event_channel((*C.struct_rdma_event_channel)(ch))
}

func getCMEvent(ch unsafe.Pointer, ev *cCMEv) error {
	return gvErr(C.gv_cm_event((*C.struct_rdma_event_channel)(ch), ev))
}

func createID(ch unsafe.Pointer) (uint64, error) {
	var id C.uint64_t
	if rc := C.gv_create_id((*C.struct_rdma_event_channel)(ch), &id); rc != 0 {
		return 0, errnoOf(rc)
	}
	return uint64(id), nil
}

func bindListen(id uint64, ip uint32, port uint16, backlog int) error {
	return gvErr(C.gv_bind_listen(C.uint64_t(id), C.uint32_t(ip), C.uint16_t(port), C.int(backlog)))
}

func resolveAddr(id uint64, src, ip uint32, port uint16, ms int) error {
	return gvErr(C.gv_resolve_addr(C.uint64_t(id), C.uint32_t(src), C.uint32_t(ip), C.uint16_t(port), C.int(ms)))
}

func resolveRoute(id uint64, ms int) error {
	return gvErr(C.gv_resolve_route(C.uint64_t(id), C.int(ms)))
}

func idAddrs(id uint64) (lip uint32, lport uint16, rip uint32, rport uint16) {
	var a, c C.uint32_t
	var b, d C.uint16_t
	C.gv_addrs(C.uint64_t(id), &a, &b, &c, &d)
	return uint32(a), uint16(b), uint32(c), uint16(d)
}

func idDevice(id uint64) string { return C.GoString(C.gv_id_dev(C.uint64_t(id))) }

// cmParam is what connect and accept send.
type cmParam struct {
	pdata               []byte
	rr, ini, retry, rnr uint8
	qpn                 uint32
}

func (p *cmParam) call(f func(C.uint64_t, unsafe.Pointer, C.int, C.uint8_t, C.uint8_t, C.uint8_t, C.uint8_t, C.uint32_t) C.int, id uint64) error {
	var pd unsafe.Pointer
	if len(p.pdata) > 0 {
		pd = C.CBytes(p.pdata)
		defer C.free(pd)
	}
	return gvErr(f(C.uint64_t(id), pd, C.int(len(p.pdata)), C.uint8_t(p.rr), C.uint8_t(p.ini), C.uint8_t(p.retry), C.uint8_t(p.rnr), C.uint32_t(p.qpn)))
}

func connectID(id uint64, p *cmParam) error {
	return p.call(func(a C.uint64_t, b unsafe.Pointer, c C.int, d, e, f, g C.uint8_t, h C.uint32_t) C.int {
		return C.gv_connect(a, b, c, d, e, f, g, h)
	}, id)
}

func acceptID(id uint64, p *cmParam) error {
	return p.call(func(a C.uint64_t, b unsafe.Pointer, c C.int, d, e, f, g C.uint8_t, h C.uint32_t) C.int {
		return C.gv_accept(a, b, c, d, e, f, g, h)
	}, id)
}

func rejectID(id uint64, pdata []byte) error {
	var pd unsafe.Pointer
	if len(pdata) > 0 {
		pd = C.CBytes(pdata)
		defer C.free(pd)
	}
	return gvErr(C.gv_reject(C.uint64_t(id), pd, C.int(len(pdata))))
}

func establishID(id uint64) error  { return gvErr(C.gv_establish(C.uint64_t(id))) }
func disconnectID(id uint64) error { return gvErr(C.gv_disconnect(C.uint64_t(id))) }
func destroyID(id uint64) error    { return gvErr(C.gv_destroy_id(C.uint64_t(id))) }

// cmModify moves qp to state with the CM's attributes for id; ird, ord and
// access replace the CM's where not negative.
func cmModify(id uint64, qp unsafe.Pointer, state, ird, ord, access int) error {
	return gvErr(C.gv_cm_modify(C.uint64_t(id), (*C.struct_ibv_qp)(qp), C.int(state), C.int(ird), C.int(ord), C.int(access)))
}

// CM event types (rdma_cm_event_type).
const (
	cmAddrResolved    = C.RDMA_CM_EVENT_ADDR_RESOLVED
	cmAddrError       = C.RDMA_CM_EVENT_ADDR_ERROR
	cmRouteResolved   = C.RDMA_CM_EVENT_ROUTE_RESOLVED
	cmRouteError      = C.RDMA_CM_EVENT_ROUTE_ERROR
	cmConnectRequest  = C.RDMA_CM_EVENT_CONNECT_REQUEST
	cmConnectResponse = C.RDMA_CM_EVENT_CONNECT_RESPONSE
	cmConnectError    = C.RDMA_CM_EVENT_CONNECT_ERROR
	cmUnreachable     = C.RDMA_CM_EVENT_UNREACHABLE
	cmRejected        = C.RDMA_CM_EVENT_REJECTED
	cmEstablished     = C.RDMA_CM_EVENT_ESTABLISHED
	cmDisconnected    = C.RDMA_CM_EVENT_DISCONNECTED
	cmDeviceRemoval   = C.RDMA_CM_EVENT_DEVICE_REMOVAL
	cmTimewaitExit    = C.RDMA_CM_EVENT_TIMEWAIT_EXIT
)

// libibverbs constants the Go side uses.
const (
	ibvQPSReset = C.IBV_QPS_RESET
	ibvQPSInit  = C.IBV_QPS_INIT
	ibvQPSRTR   = C.IBV_QPS_RTR
	ibvQPSRTS   = C.IBV_QPS_RTS
	ibvQPSSQD   = C.IBV_QPS_SQD
	ibvQPSSQE   = C.IBV_QPS_SQE
	ibvQPSErr   = C.IBV_QPS_ERR

	ibvTransportIWARP = C.IBV_TRANSPORT_IWARP
	ibvLinkEthernet   = C.IBV_LINK_LAYER_ETHERNET
	ibvAtomicNone     = C.IBV_ATOMIC_NONE
	ibvAtomicHCA      = C.IBV_ATOMIC_HCA
	ibvAtomicGlob     = C.IBV_ATOMIC_GLOB
	ibvPortActive     = C.IBV_PORT_ACTIVE

	ibvDevMemMgtExt = C.IBV_DEVICE_MEM_MGT_EXTENSIONS
	ibvDevMWType2   = C.IBV_DEVICE_MEM_WINDOW_TYPE_2B

	ibvSendFence     = C.IBV_SEND_FENCE
	ibvSendSignaled  = C.IBV_SEND_SIGNALED
	ibvSendSolicited = C.IBV_SEND_SOLICITED
	ibvSendInline    = C.IBV_SEND_INLINE

	ibvWRSend         = C.IBV_WR_SEND
	ibvWRSendImm      = C.IBV_WR_SEND_WITH_IMM
	ibvWRSendInv      = C.IBV_WR_SEND_WITH_INV
	ibvWRWrite        = C.IBV_WR_RDMA_WRITE
	ibvWRWriteImm     = C.IBV_WR_RDMA_WRITE_WITH_IMM
	ibvWRRead         = C.IBV_WR_RDMA_READ
	ibvWRCmpSwap      = C.IBV_WR_ATOMIC_CMP_AND_SWP
	ibvWRFetchAdd     = C.IBV_WR_ATOMIC_FETCH_AND_ADD
	ibvWCWithImm      = C.IBV_WC_WITH_IMM
	ibvWCWithInv      = C.IBV_WC_WITH_INV
	ibvWCRecv         = C.IBV_WC_RECV
	ibvWCRecvRDMAImm  = C.IBV_WC_RECV_RDMA_WITH_IMM
	ibvAccLocalWrite  = C.IBV_ACCESS_LOCAL_WRITE
	ibvAccRemoteWrite = C.IBV_ACCESS_REMOTE_WRITE
	ibvAccRemoteRead  = C.IBV_ACCESS_REMOTE_READ
	ibvAccRemoteAtom  = C.IBV_ACCESS_REMOTE_ATOMIC
	ibvAccMWBind      = C.IBV_ACCESS_MW_BIND

	ibvQPState     = C.IBV_QP_STATE
	ibvQPCurState  = C.IBV_QP_CUR_STATE
	ibvQPAccess    = C.IBV_QP_ACCESS_FLAGS
	ibvQPPKey      = C.IBV_QP_PKEY_INDEX
	ibvQPPort      = C.IBV_QP_PORT
	ibvQPAV        = C.IBV_QP_AV
	ibvQPPathMTU   = C.IBV_QP_PATH_MTU
	ibvQPTimeout   = C.IBV_QP_TIMEOUT
	ibvQPRetry     = C.IBV_QP_RETRY_CNT
	ibvQPRNRRetry  = C.IBV_QP_RNR_RETRY
	ibvQPRQPSN     = C.IBV_QP_RQ_PSN
	ibvQPMaxRd     = C.IBV_QP_MAX_QP_RD_ATOMIC
	ibvQPMinRNR    = C.IBV_QP_MIN_RNR_TIMER
	ibvQPSQPSN     = C.IBV_QP_SQ_PSN
	ibvQPMaxDestRd = C.IBV_QP_MAX_DEST_RD_ATOMIC
	ibvQPDestQPN   = C.IBV_QP_DEST_QPN
	ibvQPSQDNotify = C.IBV_QP_EN_SQD_ASYNC_NOTIFY

	ibvEvCQErr       = C.IBV_EVENT_CQ_ERR
	ibvEvQPFatal     = C.IBV_EVENT_QP_FATAL
	ibvEvQPReqErr    = C.IBV_EVENT_QP_REQ_ERR
	ibvEvQPAccessErr = C.IBV_EVENT_QP_ACCESS_ERR
	ibvEvCommEst     = C.IBV_EVENT_COMM_EST
	ibvEvLastWQE     = C.IBV_EVENT_QP_LAST_WQE_REACHED
	ibvEvDevFatal    = C.IBV_EVENT_DEVICE_FATAL
)

// setAV fills a RoCE address vector: the peer's GID through our GID index.
func setAV(a *qpAttr, gid [16]byte, sgid int, hop, tclass uint8) {
	a.ah_attr.is_global = 1
	a.ah_attr.port_num = 1
	a.ah_attr.grh.sgid_index = C.uint8_t(sgid)
	a.ah_attr.grh.hop_limit = C.uint8_t(hop)
	a.ah_attr.grh.traffic_class = C.uint8_t(tclass)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&a.ah_attr.grh.dgid)), 16), gid[:])
}

func avGID(a *qpAttr) (gid [16]byte) {
	copy(gid[:], unsafe.Slice((*byte)(unsafe.Pointer(&a.ah_attr.grh.dgid)), 16))
	return gid
}

func cuint(n uint32) C.uint32_t { return C.uint32_t(n) }

func cu64(v uint64) C.uint64_t { return C.uint64_t(v) }
func cu8(v uint8) C.uint8_t    { return C.uint8_t(v) }

// C2Bytes copies an event's private data into Go memory.
func C2Bytes(e *cCMEv) []byte {
	if e.pdata_len == 0 {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(&e.pdata[0]), C.int(e.pdata_len))
}
