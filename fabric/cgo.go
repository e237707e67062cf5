//go:build cgo && libfabric

package fabric

// This is the only file of the package that imports "C": thin _C_* shims
// over libfabric, no state and no policy. Handles cross into Go as
// uintptr-based types (hFabric, hCQ, ...) that Go never dereferences; the
// C side casts them (P). Batches cross as pointer-free Go structs whose
// layout the C side mirrors (wrDesc, cqEntry, eqEvent, infoAttrs; sizes
// checked in init), so C never holds a Go pointer.
//
// Memory libfabric keeps using after a call returns (registered regions,
// operands, inline copies) is off the Go heap (package mem, C.malloc) or
// pinned by the caller with runtime.Pinner; its address reaches C as an
// integer.

/*
#cgo LDFLAGS: -lfabric
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>

#define P(t, h) ((t *) (uintptr_t) (h))
#define GV_MAX_SGE 16
#define GV_CM_DATA_MAX 512
#define GV_CQ_BATCH 64
#define GV_EVENT_ERROR 0xffffffffu

// An operation context: the provider owns ctx while the operation is in
// flight (FI_CONTEXT, FI_CONTEXT2); tag names the work request.
typedef struct { struct fi_context2 ctx; uint64_t tag; } gv_ctx;
typedef struct { uint64_t addr, len, desc; } gv_sge;
typedef struct {
	uint32_t op, nsge;
	uint64_t flags, ctx, raddr, rkey, data, cmp, operand, cmp_desc, op_desc;
	gv_sge sge[GV_MAX_SGE];
} gv_wr;
typedef struct { uint64_t tag, flags, len, data; int32_t err, prov_errno; } gv_cqe;
typedef struct {
	uint32_t event; int32_t err, prov_errno; uint32_t datalen;
	uint64_t fid, info;
	uint8_t data[GV_CM_DATA_MAX];
} gv_eqe;
typedef struct {
	uint64_t caps, mode, tx_op_flags, tx_msg_order, rx_msg_order, max_msg_size;
	uint64_t tx_size, rx_size, tx_iov, rx_iov, rma_iov, inject;
	uint64_t ep_cnt, cq_cnt, mr_cnt, mr_key_size, cq_data_size, mr_iov;
	uint64_t link_speed, mtu;
	uint32_t mr_mode, ep_type, addr_format, threading, data_progress, control_progress;
	uint32_t prov_version, api_version;
} gv_attrs;
enum { GV_SEND = 1, GV_RECV, GV_WRITE, GV_READ, GV_CSWAP, GV_FADD, GV_AWRITE };

static uintptr_t gv_getinfo(uint32_t version, const char *prov, const char *fab, const char *dom,
	uint32_t ep_type, uint64_t caps, uint64_t mode, uint32_t mr_mode, uint64_t tx_flags, int *ret) {
	struct fi_info *hints = NULL, *info = NULL;
	if (prov) {
		if (!(hints = fi_allocinfo())) { *ret = -FI_ENOMEM; return 0; }
		hints->fabric_attr->prov_name = strdup(prov);
		if (fab) hints->fabric_attr->name = strdup(fab);
		if (dom) hints->domain_attr->name = strdup(dom);
		hints->ep_attr->type = ep_type;
		hints->caps = caps;
		hints->mode = mode;
		hints->domain_attr->mr_mode = mr_mode;
		hints->domain_attr->threading = FI_THREAD_SAFE;
		hints->tx_attr->op_flags = tx_flags;
	}
	*ret = fi_getinfo(version, NULL, NULL, 0, hints, &info);
	if (hints) fi_freeinfo(hints);
	return *ret ? 0 : (uintptr_t) info;
}

static void gv_attrs_of(uintptr_t h, gv_attrs *a, char **prov, char **fab, char **dom) {
	struct fi_info *i = P(struct fi_info, h);
	memset(a, 0, sizeof *a);
	a->caps = i->caps; a->mode = i->mode; a->addr_format = i->addr_format;
	if (i->tx_attr) {
		a->tx_op_flags = i->tx_attr->op_flags; a->tx_msg_order = i->tx_attr->msg_order;
		a->tx_size = i->tx_attr->size; a->tx_iov = i->tx_attr->iov_limit;
		a->rma_iov = i->tx_attr->rma_iov_limit; a->inject = i->tx_attr->inject_size;
	}
	if (i->rx_attr) {
		a->rx_msg_order = i->rx_attr->msg_order; a->rx_size = i->rx_attr->size; a->rx_iov = i->rx_attr->iov_limit;
	}
	if (i->ep_attr) { a->max_msg_size = i->ep_attr->max_msg_size; a->ep_type = i->ep_attr->type; }
	if (i->domain_attr) {
		struct fi_domain_attr *d = i->domain_attr;
		a->ep_cnt = d->ep_cnt; a->cq_cnt = d->cq_cnt; a->mr_cnt = d->mr_cnt; a->mr_key_size = d->mr_key_size;
		a->cq_data_size = d->cq_data_size; a->mr_iov = d->mr_iov_limit; a->mr_mode = d->mr_mode;
		a->threading = d->threading; a->data_progress = d->data_progress; a->control_progress = d->control_progress;
		*dom = d->name;
	}
	if (i->fabric_attr) {
		*prov = i->fabric_attr->prov_name; *fab = i->fabric_attr->name;
		a->prov_version = i->fabric_attr->prov_version; a->api_version = i->fabric_attr->api_version;
	}
	if (i->nic && i->nic->link_attr) { a->link_speed = i->nic->link_attr->speed; a->mtu = i->nic->link_attr->mtu; }
}

// gv_set_addr replaces the source or destination address of an info with
// a malloc'd copy (fi_freeinfo frees it).
static int gv_set_addr(uintptr_t h, int dest, const void *addr, size_t len, uint32_t format) {
	struct fi_info *i = P(struct fi_info, h);
	void *p = NULL;
	if (len && !(p = malloc(len))) return -FI_ENOMEM;
	if (len) memcpy(p, addr, len);
	if (dest) { free(i->dest_addr); i->dest_addr = p; i->dest_addrlen = len; }
	else { free(i->src_addr); i->src_addr = p; i->src_addrlen = len; }
	if (len) i->addr_format = format;
	return 0;
}

static int gv_fabric(uintptr_t i, uintptr_t *out) {
	return fi_fabric(P(struct fi_info, i)->fabric_attr, (struct fid_fabric **) out, NULL);
}

static int gv_domain(uintptr_t f, uintptr_t i, uintptr_t *out) {
	return fi_domain(P(struct fid_fabric, f), P(struct fi_info, i), (struct fid_domain **) out, NULL);
}

static int gv_eq_open(uintptr_t f, size_t size, uintptr_t *out) {
	struct fi_eq_attr attr = { .size = size, .flags = FI_WRITE, .wait_obj = FI_WAIT_UNSPEC };
	return fi_eq_open(P(struct fid_fabric, f), &attr, (struct fid_eq **) out, NULL);
}

static int gv_cq_open(uintptr_t d, size_t size, int waitfd, uintptr_t *out) {
	struct fi_cq_attr attr = { .size = size, .format = FI_CQ_FORMAT_DATA,
		.wait_obj = waitfd ? FI_WAIT_FD : FI_WAIT_NONE };
	return fi_cq_open(P(struct fid_domain, d), &attr, (struct fid_cq **) out, NULL);
}

static int gv_wait_fd(uintptr_t h) {
	int fd = -1, ret = fi_control(P(struct fid, h), FI_GETWAIT, &fd);
	return ret ? ret : fd;
}

static int gv_mr_reg(uintptr_t d, uint64_t addr, uint64_t len, uint64_t access, uint64_t key,
	uintptr_t *out, uint64_t *out_key, uint64_t *desc) {
	struct fid_mr *mr;
	int ret = fi_mr_reg(P(struct fid_domain, d), (void *) (uintptr_t) addr, len, access, 0, key, 0, &mr, NULL);
	if (ret) return ret;
	*out = (uintptr_t) mr;
	*out_key = fi_mr_key(mr);
	*desc = (uint64_t) (uintptr_t) fi_mr_desc(mr);
	return 0;
}

static uintptr_t gv_ctx_alloc(size_t n, uint64_t tagbase) {
	gv_ctx *c = calloc(n ? n : 1, sizeof *c);
	if (c) for (size_t i = 0; i < n; i++) c[i].tag = tagbase + i;
	return (uintptr_t) c;
}

static ssize_t gv_post(uintptr_t h, gv_wr *w) {
	struct fid_ep *ep = P(struct fid_ep, h);
	struct iovec iov[GV_MAX_SGE];
	void *desc[GV_MAX_SGE];
	uint64_t total = 0;
	uint32_t n = w->nsge > GV_MAX_SGE ? GV_MAX_SGE : w->nsge;
	// descs is NULL unless every entry has a descriptor: the verbs provider
	// reads desc[i]->lkey of each entry of an array it is given
	// (vrb_set_sge_iov), and an inline copy (FI_INJECT) has no region. A
	// NULL array is libfabric's "no descriptors", which inject allows.
	void **descs = n ? desc : NULL;
	for (uint32_t i = 0; i < n; i++) {
		iov[i].iov_base = (void *) (uintptr_t) w->sge[i].addr;
		iov[i].iov_len = w->sge[i].len;
		desc[i] = (void *) (uintptr_t) w->sge[i].desc;
		if (!desc[i]) descs = NULL;
		total += w->sge[i].len;
	}
	void *ctx = (void *) (uintptr_t) w->ctx;
	if (w->op == GV_SEND || w->op == GV_RECV) {
		struct fi_msg m = { .msg_iov = iov, .desc = descs, .iov_count = n, .context = ctx, .data = w->data };
		return w->op == GV_SEND ? fi_sendmsg(ep, &m, w->flags) : fi_recvmsg(ep, &m, w->flags);
	}
	if (w->op == GV_WRITE || w->op == GV_READ) {
		// A zero-length WRITE or READ names no remote memory: no rma_iov,
		// so no key is checked (as IB does for length 0).
		struct fi_rma_iov rma = { .addr = w->raddr, .len = total, .key = w->rkey };
		struct fi_msg_rma m = { .msg_iov = iov, .desc = descs, .iov_count = n,
			.rma_iov = &rma, .rma_iov_count = total ? 1 : 0, .context = ctx, .data = w->data };
		return w->op == GV_WRITE ? fi_writemsg(ep, &m, w->flags) : fi_readmsg(ep, &m, w->flags);
	}
	struct fi_ioc op = { .addr = (void *) (uintptr_t) w->operand, .count = 1 };
	void *op_desc = (void *) (uintptr_t) w->op_desc;
	struct fi_rma_ioc rma = { .addr = w->raddr, .count = 1, .key = w->rkey };
	struct fi_msg_atomic m = { .msg_iov = &op, .desc = &op_desc, .iov_count = 1,
		.rma_iov = &rma, .rma_iov_count = 1, .datatype = FI_UINT64, .context = ctx };
	struct fi_ioc res = { .addr = iov[0].iov_base, .count = 1 };
	struct fi_ioc cmp = { .addr = (void *) (uintptr_t) w->cmp, .count = 1 };
	void *cmp_desc = (void *) (uintptr_t) w->cmp_desc;
	switch (w->op) {
	case GV_AWRITE: m.op = FI_ATOMIC_WRITE; return fi_atomicmsg(ep, &m, w->flags);
	case GV_FADD: m.op = FI_SUM; return n == 1 ? fi_fetch_atomicmsg(ep, &m, &res, desc, 1, w->flags) : -FI_EINVAL;
	case GV_CSWAP: m.op = FI_CSWAP; return n == 1 ? fi_compare_atomicmsg(ep, &m, &cmp, &cmp_desc, 1, &res, desc, 1, w->flags) : -FI_EINVAL;
	}
	return -FI_EINVAL;
}

static uint64_t gv_tag(void *ctx, uint64_t flags, int trust_remote) {
	// Completions of remote writes carry a context of ours only where
	// they consume a posted receive (FI_RX_CQ_DATA).
	return ctx && (trust_remote || !(flags & FI_REMOTE_WRITE)) ? ((gv_ctx *) ctx)->tag : 0;
}

// gv_cq_read reads up to n completions (at most GV_CQ_BATCH), or one error
// completion; it returns their count, 0 when there is none, or -fi_errno.
static ssize_t gv_cq_read(uintptr_t h, gv_cqe *out, size_t n, int trust) {
	struct fid_cq *cq = P(struct fid_cq, h);
	struct fi_cq_data_entry e[GV_CQ_BATCH];
	ssize_t r = fi_cq_read(cq, e, n > GV_CQ_BATCH ? GV_CQ_BATCH : n);
	for (ssize_t i = 0; i < r; i++)
		out[i] = (gv_cqe) { gv_tag(e[i].op_context, e[i].flags, trust), e[i].flags, e[i].len, e[i].data, 0, 0 };
	if (r >= 0 || r == -FI_EAGAIN) return r < 0 ? 0 : r;
	if (r != -FI_EAVAIL) return r;
	struct fi_cq_err_entry ee;
	memset(&ee, 0, sizeof ee);
	if ((r = fi_cq_readerr(cq, &ee, 0)) <= 0) return r == -FI_EAGAIN ? 0 : r;
	out[0] = (gv_cqe) { gv_tag(ee.op_context, ee.flags, trust), ee.flags, ee.len, ee.data,
		ee.err ? ee.err : FI_EOTHER, ee.prov_errno };
	return 1;
}

// gv_eq_wait waits up to timeout ms for an event, leaving it queued
// (FI_PEEK): 1 when one (or an error) is there, 0 when none.
static ssize_t gv_eq_wait(uintptr_t h, int timeout) {
	union { struct fi_eq_cm_entry cm; uint8_t raw[sizeof(struct fi_eq_cm_entry) + GV_CM_DATA_MAX]; } buf;
	uint32_t event;
	ssize_t r = fi_eq_sread(P(struct fid_eq, h), &event, &buf, sizeof buf, timeout, FI_PEEK);
	return (r == -FI_EAGAIN || r == -FI_ETIMEDOUT) ? 0 : (r == -FI_EAVAIL || r >= 0) ? 1 : r;
}

// gv_eq_read takes one event if there is one: 1, 0, or -fi_errno.
static ssize_t gv_eq_read(uintptr_t h, gv_eqe *out) {
	struct fid_eq *eq = P(struct fid_eq, h);
	union { struct fi_eq_cm_entry cm; struct fi_eq_entry ev; uint8_t raw[sizeof(struct fi_eq_cm_entry) + GV_CM_DATA_MAX]; } buf;
	uint32_t event = 0;
	memset(out, 0, sizeof *out);
	ssize_t r = fi_eq_read(eq, &event, &buf, sizeof buf, 0);
	if (r == -FI_EAGAIN) return 0;
	if (r == -FI_EAVAIL) {
		struct fi_eq_err_entry ee;
		memset(&ee, 0, sizeof ee);
		if ((r = fi_eq_readerr(eq, &ee, 0)) <= 0) return r == -FI_EAGAIN ? 0 : r;
		out->event = GV_EVENT_ERROR;
		out->fid = (uint64_t) (uintptr_t) ee.fid;
		out->err = ee.err ? ee.err : FI_EOTHER;
		out->prov_errno = ee.prov_errno;
		if (ee.err_data && ee.err_data_size) { // a rejection's connection data
			out->datalen = ee.err_data_size > GV_CM_DATA_MAX ? GV_CM_DATA_MAX : ee.err_data_size;
			memcpy(out->data, ee.err_data, out->datalen);
		}
		return 1;
	}
	if (r < 0) return r;
	out->event = event;
	out->fid = (uint64_t) (uintptr_t) buf.ev.fid;
	if (event == FI_CONNREQ || event == FI_CONNECTED || event == FI_SHUTDOWN) {
		out->info = (uint64_t) (uintptr_t) buf.cm.info;
		if ((size_t) r > sizeof(struct fi_eq_cm_entry)) {
			size_t k = r - sizeof(struct fi_eq_cm_entry);
			out->datalen = k > GV_CM_DATA_MAX ? GV_CM_DATA_MAX : k;
			memcpy(out->data, buf.cm.data, out->datalen);
		}
	}
	return 1;
}

static int gv_eq_wake(uintptr_t h) {
	struct fi_eq_entry e = { 0 };
	ssize_t r = fi_eq_write(P(struct fid_eq, h), FI_NOTIFY, &e, sizeof e, 0);
	return r < 0 ? (int) r : 0;
}

static int gv_endpoint(uintptr_t d, uintptr_t i, uintptr_t eq, uintptr_t tx, uintptr_t rx, uintptr_t *out) {
	struct fid_ep *ep;
	int ret = fi_endpoint(P(struct fid_domain, d), P(struct fi_info, i), &ep, NULL);
	if (ret) return ret;
	if ((ret = fi_ep_bind(ep, P(struct fid, eq), 0)) || (ret = fi_ep_bind(ep, P(struct fid, tx), FI_TRANSMIT)) ||
	    (ret = fi_ep_bind(ep, P(struct fid, rx), FI_RECV)) || (ret = fi_enable(ep))) {
		fi_close(&ep->fid);
		return ret;
	}
	*out = (uintptr_t) ep;
	return 0;
}

static int gv_passive_ep(uintptr_t f, uintptr_t i, uintptr_t eq, int listen, uintptr_t *out) {
	struct fid_pep *pep;
	int ret = fi_passive_ep(P(struct fid_fabric, f), P(struct fi_info, i), &pep, NULL);
	if (ret) return ret;
	if ((ret = fi_pep_bind(pep, P(struct fid, eq), 0)) || (listen && (ret = fi_listen(pep)))) {
		fi_close(&pep->fid);
		return ret;
	}
	*out = (uintptr_t) pep;
	return 0;
}

static ssize_t gv_getname(uintptr_t h, int peer, void *buf, size_t len) {
	int ret = peer ? fi_getpeer(P(struct fid_ep, h), buf, &len) : fi_getname(P(struct fid, h), buf, &len);
	return ret ? ret : (ssize_t) len;
}

static ssize_t gv_cm_data_size(uintptr_t h) {
	size_t v = 0, n = sizeof v;
	int ret = fi_getopt(P(struct fid, h), FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &n);
	return ret ? ret : (ssize_t) v;
}

static int gv_connect(uintptr_t ep, const void *addr, const void *p, size_t n) { return fi_connect(P(struct fid_ep, ep), addr, p, n); }
static int gv_accept(uintptr_t ep, const void *p, size_t n) { return fi_accept(P(struct fid_ep, ep), p, n); }
static int gv_reject(uintptr_t pep, uintptr_t i, const void *p, size_t n) { return fi_reject(P(struct fid_pep, pep), P(struct fi_info, i)->handle, p, n); }
static int gv_shutdown(uintptr_t ep) { return fi_shutdown(P(struct fid_ep, ep), 0); }
static int gv_close(uintptr_t h) { return h ? fi_close(P(struct fid, h)) : 0; }
static void gv_freeinfo(uintptr_t i) { if (i) fi_freeinfo(P(struct fi_info, i)); }
static uintptr_t gv_dupinfo(uintptr_t i) { return (uintptr_t) fi_dupinfo(P(struct fi_info, i)); }
static uintptr_t gv_info_next(uintptr_t i) { return (uintptr_t) P(struct fi_info, i)->next; }
static void gv_free(uintptr_t p) { free((void *) p); }
static int gv_trywait(uintptr_t f, uintptr_t *fids, int n) { return fi_trywait(P(struct fid_fabric, f), (struct fid **) fids, n); }
// gv_mr_shared registers one buffer twice with different rights and
// reports whether the provider handed back one registration (the same
// key): a registration cache that shares regions and their rights. 1, 0,
// or -fi_errno.
static int gv_mr_shared(uintptr_t d) {
	void *buf = calloc(1, 4096);
	struct fid_mr *a = NULL, *b = NULL;
	int ret;
	if (!buf) return -FI_ENOMEM;
	ret = fi_mr_reg(P(struct fid_domain, d), buf, 4096, FI_SEND | FI_RECV, 0, 0, 0, &a, NULL);
	if (!ret) ret = fi_mr_reg(P(struct fid_domain, d), buf, 4096, FI_SEND | FI_RECV | FI_REMOTE_READ, 0, 1, 0, &b, NULL);
	if (!ret) ret = a == b || fi_mr_key(a) == fi_mr_key(b);
	if (b && b != a) fi_close(&b->fid);
	if (a) fi_close(&a->fid);
	free(buf);
	return ret;
}

static int gv_query_atomic(uintptr_t d, int op, uint64_t flags) {
	struct fi_atomic_attr attr;
	return fi_query_atomic(P(struct fid_domain, d), FI_UINT64, op, &attr, flags);
}
*/
import "C"

import (
	"os"
	"sync"
	"unsafe"
)

// mrCacheEnv is libfabric's switch for its registration cache, read once
// when libfabric initializes (the first fi_getinfo).
const mrCacheEnv = "FI_MR_CACHE_MAX_COUNT"

var libInit sync.Once

// initLibfabric runs before the first libfabric call. Unless the user
// chose otherwise, it turns libfabric's registration cache off: the
// verbs provider's (1.17, verbs_mr.c vrb_mr_cache_add_region) registers
// every cached region with all remote rights and hands the same
// registration, key included, to every fi_mr_reg of the same memory, so a
// region's rights and a re-registration's new key could not hold. goverbs
// registers long-lived regions explicitly, which is what the cache would
// save. Device.probe checks the cache is off.
func initLibfabric() {
	libInit.Do(func() {
		if _, set := os.LookupEnv(mrCacheEnv); !set {
			os.Setenv(mrCacheEnv, "0")
		}
	})
}

// Handles: C pointers kept as integers, never dereferenced in Go.
type (
	hInfo   uintptr // *struct fi_info
	hFabric uintptr // *struct fid_fabric
	hDomain uintptr // *struct fid_domain
	hEQ     uintptr // *struct fid_eq
	hCQ     uintptr // *struct fid_cq
	hEP     uintptr // *struct fid_ep
	hPEP    uintptr // *struct fid_pep
	hMR     uintptr // *struct fid_mr
	hCtx    uintptr // *gv_ctx, an array of operation contexts
)

// Sizes the Go mirrors use.
const (
	cMaxSGE    = C.GV_MAX_SGE
	cCMDataMax = C.GV_CM_DATA_MAX
	cCQBatch   = C.GV_CQ_BATCH
)

// ctxSize is the size of one operation context.
const ctxSize = C.sizeof_gv_ctx

func init() {
	if unsafe.Sizeof(wrDesc{}) != C.sizeof_gv_wr || unsafe.Sizeof(cqEntry{}) != C.sizeof_gv_cqe ||
		unsafe.Sizeof(eqEvent{}) != C.sizeof_gv_eqe || unsafe.Sizeof(infoAttrs{}) != C.sizeof_gv_attrs {
		panic("fabric: the Go mirrors of the C structs differ in size")
	}
}

// Operation codes of _C_post.
const (
	cOpSend   = C.GV_SEND
	cOpRecv   = C.GV_RECV
	cOpWrite  = C.GV_WRITE
	cOpRead   = C.GV_READ
	cOpCSwap  = C.GV_CSWAP
	cOpFAdd   = C.GV_FADD
	cOpAWrite = C.GV_AWRITE
)

// libfabric constants the Go side uses.
const (
	fiVersion = uint32(C.FI_MAJOR_VERSION)<<16 | uint32(C.FI_MINOR_VERSION)

	fiEPMsg   = uint32(C.FI_EP_MSG)
	fiEPRDM   = uint32(C.FI_EP_RDM)
	fiEPDgram = uint32(C.FI_EP_DGRAM)

	fiMsg          = uint64(C.FI_MSG)
	fiRMA          = uint64(C.FI_RMA)
	fiAtomic       = uint64(C.FI_ATOMIC)
	fiRead         = uint64(C.FI_READ)
	fiWrite        = uint64(C.FI_WRITE)
	fiSend         = uint64(C.FI_SEND)
	fiRecv         = uint64(C.FI_RECV)
	fiRemoteRead   = uint64(C.FI_REMOTE_READ)
	fiRemoteWrite  = uint64(C.FI_REMOTE_WRITE)
	fiRMAPMem      = uint64(C.FI_RMA_PMEM)
	fiHMem         = uint64(C.FI_HMEM)
	fiRemoteCQData = uint64(C.FI_REMOTE_CQ_DATA)
	fiInject       = uint64(C.FI_INJECT)
	fiCompletion   = uint64(C.FI_COMPLETION)
	fiDeliveryComp = uint64(C.FI_DELIVERY_COMPLETE)

	fiModeContext  = uint64(C.FI_CONTEXT)
	fiModeContext2 = uint64(C.FI_CONTEXT2)
	fiModeRxCQData = uint64(C.FI_RX_CQ_DATA)

	fiMRLocal    = uint32(C.FI_MR_LOCAL)
	fiMRRaw      = uint32(C.FI_MR_RAW)
	fiMRVirtAddr = uint32(C.FI_MR_VIRT_ADDR)
	fiMRAlloc    = uint32(C.FI_MR_ALLOCATED)
	fiMRProvKey  = uint32(C.FI_MR_PROV_KEY)
	fiMREndpoint = uint32(C.FI_MR_ENDPOINT)

	fiOrderRAW = uint64(C.FI_ORDER_RAW)
	fiOrderSAW = uint64(C.FI_ORDER_SAW)

	fiSockaddrIn  = uint32(C.FI_SOCKADDR_IN)
	fiSockaddrIn6 = uint32(C.FI_SOCKADDR_IN6)

	fiConnReq   = uint32(C.FI_CONNREQ)
	fiConnected = uint32(C.FI_CONNECTED)
	fiShutdown  = uint32(C.FI_SHUTDOWN)
	fiNotify    = uint32(C.FI_NOTIFY)
	eqError     = uint32(C.GV_EVENT_ERROR)

	fiCSwap       = int(C.FI_CSWAP)
	fiSum         = int(C.FI_SUM)
	fiAtomicWrite = int(C.FI_ATOMIC_WRITE)
	fiCompareOp   = uint64(C.FI_COMPARE_ATOMIC)
	fiFetchOp     = uint64(C.FI_FETCH_ATOMIC)
)

// cerr turns a negative libfabric return into an Errno, or nil.
func cerr[T ~int | ~int32 | ~int64](r T) error {
	if r >= 0 {
		return nil
	}
	return Errno(-r)
}

// cn returns the count of a non-negative return, or the Errno.
func cn[T ~int32 | ~int64](r T) (int, error) {
	if r < 0 {
		return 0, Errno(-r)
	}
	return int(r), nil
}

func u[H ~uintptr](h H) C.uintptr_t { return C.uintptr_t(h) }

func cdata(b []byte) (unsafe.Pointer, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&b[0]), C.size_t(len(b))
}

// _C_getinfo calls fi_getinfo; with prov empty it passes no hints.
func _C_getinfo(prov, fabricName, domain string, epType uint32, caps, mode uint64, mrMode uint32, txFlags uint64) (hInfo, error) {
	cstr := func(s string) *C.char {
		if s == "" {
			return nil
		}
		return C.CString(s)
	}
	initLibfabric()
	p, f, d := cstr(prov), cstr(fabricName), cstr(domain)
	defer C.free(unsafe.Pointer(p))
	defer C.free(unsafe.Pointer(f))
	defer C.free(unsafe.Pointer(d))
	var ret C.int
	i := C.gv_getinfo(C.uint32_t(fiVersion), p, f, d, C.uint32_t(epType), C.uint64_t(caps), C.uint64_t(mode),
		C.uint32_t(mrMode), C.uint64_t(txFlags), &ret)
	return hInfo(i), cerr(ret)
}

func _C_freeinfo(i hInfo)            { C.gv_freeinfo(u(i)) }
func _C_dupinfo(i hInfo) hInfo       { return hInfo(C.gv_dupinfo(u(i))) }
func _C_info_next(i hInfo) hInfo     { return hInfo(C.gv_info_next(u(i))) }
func _C_free(p hCtx)                 { C.gv_free(u(p)) }
func _C_close[H ~uintptr](h H) error { return cerr(C.gv_close(u(h))) }

// _C_info_attrs reads what the Go side needs from one fi_info.
func _C_info_attrs(i hInfo) (a infoAttrs, prov, fabricName, domain string) {
	var p, f, d *C.char
	C.gv_attrs_of(u(i), (*C.gv_attrs)(unsafe.Pointer(&a)), &p, &f, &d)
	return a, C.GoString(p), C.GoString(f), C.GoString(d)
}

// _C_info_set_addr replaces the source or destination address of i.
func _C_info_set_addr(i hInfo, dest bool, addr []byte, format uint32) error {
	p, n := cdata(addr)
	return cerr(C.gv_set_addr(u(i), cbool(dest), p, n, C.uint32_t(format)))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func _C_fabric(i hInfo) (hFabric, error) {
	var out C.uintptr_t
	err := cerr(C.gv_fabric(u(i), &out))
	return hFabric(out), err
}

func _C_domain(f hFabric, i hInfo) (hDomain, error) {
	var out C.uintptr_t
	err := cerr(C.gv_domain(u(f), u(i), &out))
	return hDomain(out), err
}

func _C_eq_open(f hFabric, size int) (hEQ, error) {
	var out C.uintptr_t
	err := cerr(C.gv_eq_open(u(f), C.size_t(size), &out))
	return hEQ(out), err
}

// _C_cq_open opens a CQ of FI_CQ_FORMAT_DATA, with an FI_WAIT_FD wait
// object if waitFD.
func _C_cq_open(d hDomain, size int, waitFD bool) (hCQ, error) {
	var out C.uintptr_t
	err := cerr(C.gv_cq_open(u(d), C.size_t(size), cbool(waitFD), &out))
	return hCQ(out), err
}

// _C_wait_fd returns the descriptor of a CQ's or EQ's wait object.
func _C_wait_fd[H ~uintptr](h H) (int, error) { return cn(C.gv_wait_fd(u(h))) }

// _C_trywait reports, with nil, that the objects fids may be waited on
// (fi_trywait); an error (EAGAIN) means read them first.
func _C_trywait(f hFabric, fids []uintptr) error {
	if len(fids) == 0 {
		return nil
	}
	return cerr(C.gv_trywait(u(f), (*C.uintptr_t)(unsafe.Pointer(&fids[0])), C.int(len(fids))))
}

// _C_mr_reg registers [addr, addr+n), which must stay valid and unmoved
// until _C_close of the region.
func _C_mr_reg(d hDomain, addr uintptr, n int, access, key uint64) (mr hMR, outKey, desc uint64, err error) {
	var out C.uintptr_t
	var k, ds C.uint64_t
	err = cerr(C.gv_mr_reg(u(d), C.uint64_t(addr), C.uint64_t(n), C.uint64_t(access), C.uint64_t(key), &out, &k, &ds))
	return hMR(out), uint64(k), uint64(ds), err
}

// _C_ctx_alloc allocates n operation contexts tagged tagbase, tagbase+1,
// ... (0 on failure); _C_free frees them.
func _C_ctx_alloc(n int, tagbase uint64) hCtx {
	return hCtx(C.gv_ctx_alloc(C.size_t(n), C.uint64_t(tagbase)))
}

// _C_post posts the operation w describes.
func _C_post(ep hEP, w *wrDesc) error { return cerr(C.gv_post(u(ep), (*C.gv_wr)(unsafe.Pointer(w)))) }

// _C_cq_read reads completions into out.
func _C_cq_read(cq hCQ, out []cqEntry, trustRemote bool) (int, error) {
	return cn(C.gv_cq_read(u(cq), (*C.gv_cqe)(unsafe.Pointer(&out[0])), C.size_t(len(out)), cbool(trustRemote)))
}

// _C_eq_wait waits up to timeoutMs for an event and leaves it queued; the
// wait drives the connection progress of the providers that need it.
func _C_eq_wait(eq hEQ, timeoutMs int) (bool, error) {
	n, err := cn(C.gv_eq_wait(u(eq), C.int(timeoutMs)))
	return n == 1, err
}

// _C_eq_read takes one event into ev, if there is one.
func _C_eq_read(eq hEQ, ev *eqEvent) (bool, error) {
	n, err := cn(C.gv_eq_read(u(eq), (*C.gv_eqe)(unsafe.Pointer(ev))))
	return n == 1, err
}

// _C_eq_wake writes an FI_NOTIFY event, ending a wait.
func _C_eq_wake(eq hEQ) error { return cerr(C.gv_eq_wake(u(eq))) }

// _C_endpoint opens an active endpoint, binds the EQ and CQs, enables it.
func _C_endpoint(d hDomain, i hInfo, eq hEQ, txcq, rxcq hCQ) (hEP, error) {
	var out C.uintptr_t
	err := cerr(C.gv_endpoint(u(d), u(i), u(eq), u(txcq), u(rxcq), &out))
	return hEP(out), err
}

// _C_passive_ep opens a passive endpoint bound to eq, listening if listen.
func _C_passive_ep(f hFabric, i hInfo, eq hEQ, listen bool) (hPEP, error) {
	var out C.uintptr_t
	err := cerr(C.gv_passive_ep(u(f), u(i), u(eq), cbool(listen), &out))
	return hPEP(out), err
}

// _C_getname returns the address of an endpoint or passive endpoint, or
// with peer that of an endpoint's peer (fi_getpeer).
func _C_getname[H ~uintptr](h H, peer bool) ([]byte, error) {
	var buf [128]byte
	n, err := cn(C.gv_getname(u(h), cbool(peer), unsafe.Pointer(&buf[0]), C.size_t(len(buf))))
	return append([]byte(nil), buf[:n]...), err
}

// _C_cm_data_size returns FI_OPT_CM_DATA_SIZE of an endpoint.
func _C_cm_data_size[H ~uintptr](h H) (int, error) { return cn(C.gv_cm_data_size(u(h))) }

// _C_connect connects ep to addr (a struct sockaddr), sending data.
func _C_connect(ep hEP, addr, data []byte) error {
	a, _ := cdata(addr)
	p, n := cdata(data)
	return cerr(C.gv_connect(u(ep), a, p, n))
}

func _C_accept(ep hEP, data []byte) error {
	p, n := cdata(data)
	return cerr(C.gv_accept(u(ep), p, n))
}

// _C_reject refuses the connection request of info (an FI_CONNREQ's).
func _C_reject(pep hPEP, info hInfo, data []byte) error {
	p, n := cdata(data)
	return cerr(C.gv_reject(u(pep), u(info), p, n))
}

func _C_shutdown(ep hEP) error { return cerr(C.gv_shutdown(u(ep))) }

// _C_query_atomic reports, with nil, that the domain executes op on
// FI_UINT64 with flags (0, FI_FETCH_ATOMIC or FI_COMPARE_ATOMIC).
func _C_query_atomic(d hDomain, op int, flags uint64) error {
	return cerr(C.gv_query_atomic(u(d), C.int(op), C.uint64_t(flags)))
}

// _C_mr_shared reports whether the domain hands two registrations of one
// buffer the same registration (a registration cache).
func _C_mr_shared(d hDomain) (bool, error) {
	r := C.gv_mr_shared(u(d))
	if r < 0 {
		return false, cerr(r)
	}
	return r == 1, nil
}
